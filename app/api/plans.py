"""`POST /plans/sequential` and `POST /plans/parallel`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.api.auth import PlansCaller
from app.api.body import parse_model, read_json
from app.api.deps import RuntimeDep
from app.api.problems import PROBLEM_RESPONSES
from app.api.responses import FastJSONResponse
from app.api.schemas.plans import (
    ParallelPlanIn,
    ParallelPlanOut,
    SequentialPlanIn,
    SequentialPlanOut,
)

router = APIRouter(prefix="/plans", tags=["plans"])


def _request_body(model: type[Any]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


@router.post(
    "/sequential",
    operation_id="runSequentialPlan",
    response_class=FastJSONResponse,
    responses={200: {"model": SequentialPlanOut}, **PROBLEM_RESPONSES},
    openapi_extra=_request_body(SequentialPlanIn),
)
async def run_sequential(
    request: Request, runtime: RuntimeDep, principal: PlansCaller
) -> FastJSONResponse:
    data = await read_json(
        request, runtime.settings.max_body_bytes, runtime.settings.max_json_depth
    )
    plan = parse_model(SequentialPlanIn, data).to_plan()
    return FastJSONResponse(await runtime.plans.run_sequential(plan, caller=principal.name))


@router.post(
    "/parallel",
    operation_id="runParallelPlan",
    response_class=FastJSONResponse,
    responses={200: {"model": ParallelPlanOut}, **PROBLEM_RESPONSES},
    openapi_extra=_request_body(ParallelPlanIn),
)
async def run_parallel(
    request: Request, runtime: RuntimeDep, principal: PlansCaller
) -> FastJSONResponse:
    data = await read_json(
        request, runtime.settings.max_body_bytes, runtime.settings.max_json_depth
    )
    plan = parse_model(ParallelPlanIn, data).to_plan()
    return FastJSONResponse(await runtime.plans.run_parallel(plan, caller=principal.name))
