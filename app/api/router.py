"""`POST /router/runs` and `POST /router/runs/{run_id}/confirmations/{confirmation_id}`.

A run that ended answers 200 with its outcome, whatever its status (done,
incomplete, pending, error, or cancelled); an invalid request answers 422
listing every problem; a router that failed closed at startup answers 503.
`Prefer: respond-async` and `Idempotency-Key` work as for plans (`run_start`).
The decision route is an alias of `POST /runs/{run_id}/confirmations/{confirmation_id}`
(`app.api.confirmations`): it needs `confirmations:decide`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from app.api.auth import Decider, RouterCaller
from app.api.body import parse_model, read_json
from app.api.confirmations import DECISION_RESPONSES, decide_confirmation
from app.api.deps import RuntimeDep
from app.api.openapi import json_body
from app.api.responses import FastJSONResponse
from app.api.run_start import RUN_START_PARAMETERS, RUN_START_RESPONSES, start_run
from app.api.schemas.router import ConfirmationIn, RouterRunIn, RouterRunOut
from app.foundation.canonical import canonical_json, sha256_digest
from app.service.router.service import RouterService
from app.service.runtime import Runtime

router = APIRouter(prefix="/router", tags=["router"])

Id = Annotated[str, Path(min_length=1, max_length=64)]


def _available(runtime: Runtime) -> RouterService:
    """The router service, or 503 before the body is even read."""
    runtime.router.require_ready()
    return runtime.router


@router.post(
    "/runs",
    operation_id="startRouterRun",
    response_class=FastJSONResponse,
    responses={200: {"model": RouterRunOut}, **RUN_START_RESPONSES},
    openapi_extra=json_body(RouterRunIn, RUN_START_PARAMETERS),
)
async def start_router_run(
    request: Request, runtime: RuntimeDep, principal: RouterCaller
) -> Response:
    service = _available(runtime)
    settings = runtime.settings
    data = await read_json(request, settings.max_body_bytes, settings.max_json_depth)
    routed = parse_model(RouterRunIn, data).to_request()
    digest = sha256_digest(canonical_json(data))
    return await start_run(
        request,
        runtime,
        principal,
        data,
        # A router run's start always commits first: its calls are the model's choice.
        lambda claim, _answered_at_end: service.open_run(
            routed, principal.name, request_digest=digest, claim=claim
        ),
    )


@router.post(
    "/runs/{run_id}/confirmations/{confirmation_id}",
    operation_id="decideRouterConfirmation",
    status_code=202,
    response_class=FastJSONResponse,
    responses=DECISION_RESPONSES,
    openapi_extra=json_body(ConfirmationIn),
)
async def decide(
    run_id: Id, confirmation_id: Id, request: Request, runtime: RuntimeDep, principal: Decider
) -> FastJSONResponse:
    """An alias of `POST /runs/{run_id}/confirmations/{confirmation_id}` (503 while the
    router is unavailable, as its other route)."""
    _available(runtime)
    return await decide_confirmation(run_id, confirmation_id, request, runtime, principal.name)
