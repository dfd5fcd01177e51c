"""`POST /plans/sequential` and `POST /plans/parallel` (see `run_start` for async and retries).

The busiest routes: they take the request alone (`DirectRoute`) and resolve
the runtime, then the caller, themselves (the same functions, in the same
order, as the `RuntimeDep` and `PlansCaller` dependencies), which spares every
request FastAPI's dependency solving.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.auth import PLANS_EXECUTE, require_scope
from app.api.body import read_json
from app.api.deps import get_runtime
from app.api.direct import DirectRoute
from app.api.openapi import json_body
from app.api.plan_bodies import parallel_from_body, sequential_from_body
from app.api.responses import FastJSONResponse
from app.api.run_start import RUN_START_PARAMETERS, RUN_START_RESPONSES, start_run
from app.api.schemas.plans import (
    ParallelPlanIn,
    ParallelPlanOut,
    SequentialPlanIn,
    SequentialPlanOut,
)

router = APIRouter(prefix="/plans", tags=["plans"], route_class=DirectRoute)

plans_caller = require_scope(PLANS_EXECUTE)


@router.post(
    "/sequential",
    operation_id="runSequentialPlan",
    response_class=FastJSONResponse,
    responses={200: {"model": SequentialPlanOut}, **RUN_START_RESPONSES},
    openapi_extra=json_body(SequentialPlanIn, RUN_START_PARAMETERS),
)
async def run_sequential(request: Request) -> Response:
    runtime = await get_runtime(request)
    principal = await plans_caller(request)
    data = await read_json(
        request, runtime.settings.max_body_bytes, runtime.settings.max_json_depth
    )
    plan = sequential_from_body(data, runtime.plans)
    return await start_run(
        request,
        runtime,
        principal,
        data,
        lambda claim, at_end: runtime.plans.open_sequential(
            plan, principal.name, claim, answered_at_end=at_end
        ),
    )


@router.post(
    "/parallel",
    operation_id="runParallelPlan",
    response_class=FastJSONResponse,
    responses={200: {"model": ParallelPlanOut}, **RUN_START_RESPONSES},
    openapi_extra=json_body(ParallelPlanIn, RUN_START_PARAMETERS),
)
async def run_parallel(request: Request) -> Response:
    runtime = await get_runtime(request)
    principal = await plans_caller(request)
    data = await read_json(
        request, runtime.settings.max_body_bytes, runtime.settings.max_json_depth
    )
    plan = parallel_from_body(data, runtime.plans)
    return await start_run(
        request,
        runtime,
        principal,
        data,
        lambda claim, at_end: runtime.plans.open_parallel(
            plan, principal.name, claim, answered_at_end=at_end
        ),
    )
