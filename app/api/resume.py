"""`POST /runs/{run_id}/resume`: run an interrupted plan's calls that have no successful receipt.

The body is the run's original plan request, unchanged in meaning (key order,
whitespace and omitted defaults do not matter): only its digest was stored.
Resuming needs `plans:execute` and to be the run's creator, or `admin`. The
answer is the plan response once the run ended, or 202 with `Prefer:
respond-async`; `Idempotency-Key` works as on the plan routes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import RootModel
from starlette.responses import Response

from app.api.auth import PlansCaller
from app.api.body import read_json
from app.api.deps import RuntimeDep
from app.api.openapi import json_body
from app.api.plan_bodies import parallel_from_body, sequential_from_body
from app.api.responses import FastJSONResponse
from app.api.run_control import control_rule
from app.api.run_start import RUN_START_PARAMETERS, RUN_START_RESPONSES, start_run
from app.api.schemas.plans import (
    ParallelPlanIn,
    ParallelPlanOut,
    SequentialPlanIn,
    SequentialPlanOut,
)
from app.api.schemas.runs import RUN_PROBLEMS, Text
from app.engine import ParallelPlan, SequentialPlan
from app.service.idempotency import IdempotencyClaim
from app.service.plans.resume import RunResumer
from app.service.runs.tasks import SupervisedRun

router = APIRouter(prefix="/runs", tags=["runs"])

RunPath = Annotated[Text, Path()]


class ResumeRunIn(RootModel[SequentialPlanIn | ParallelPlanIn]):
    """The run's original plan request, as it was sent to `POST /plans/{kind}`."""


@router.post(
    "/{run_id}/resume",
    operation_id="resumeRun",
    response_class=FastJSONResponse,
    responses={
        200: {"model": SequentialPlanOut | ParallelPlanOut},
        **RUN_START_RESPONSES,
        **RUN_PROBLEMS,
    },
    openapi_extra=json_body(ResumeRunIn, RUN_START_PARAMETERS),
)
async def resume_run(
    request: Request, runtime: RuntimeDep, principal: PlansCaller, run_id: RunPath
) -> Response:
    data = await read_json(
        request, runtime.settings.max_body_bytes, runtime.settings.max_json_depth
    )
    resumer = RunResumer(runtime.plans, runtime.runs)
    kind = await resumer.find(run_id, principal, control_rule(principal))
    plan: SequentialPlan | ParallelPlan = (
        sequential_from_body(data, runtime.plans)
        if kind == "sequential"
        else parallel_from_body(data, runtime.plans)
    )

    async def open_run(claim: IdempotencyClaim | None, _answered_at_end: bool) -> SupervisedRun:
        # A resumed run's row exists already: nothing to defer.
        return await resumer.open(run_id, plan, principal.name, claim)

    return await start_run(request, runtime, principal, data, open_run)
