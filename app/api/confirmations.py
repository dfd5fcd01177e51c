"""`GET /confirmations` and `POST /runs/{run_id}/confirmations/{confirmation_id}`.

Calls waiting for a person, in plan runs and router runs alike. A key with
`runs:read` lists its own runs' confirmations; with `runs:read:all` or
`confirmations:decide`, every run's. Deciding needs `confirmations:decide`
(403 without it, even for the key's own run); the decider's key name is
audited. `POST /router/runs/{run_id}/confirmations/{confirmation_id}` is an
alias of the decision route.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from app.api.auth import ConfirmationReader, Decider
from app.api.body import parse_model, read_json
from app.api.deps import RuntimeDep
from app.api.openapi import json_body
from app.api.pagination import keyset_cursor, page_answer, parse_keyset_cursor
from app.api.problems import PROBLEM_RESPONSES
from app.api.responses import FastJSONResponse
from app.api.schemas.confirmations import ConfirmationPage, ConfirmationStatus, DecisionOut
from app.api.schemas.router import ConfirmationIn
from app.api.schemas.runs import DEFAULT_RUN_PAGE, LIST_PROBLEMS, Cursor, RunPageLimit
from app.service.runtime import Runtime

LISTING = "confirmations"

router = APIRouter(tags=["confirmations"])

Id = Annotated[str, Path(min_length=1, max_length=64)]

DECISION_RESPONSES: dict[int | str, dict[str, object]] = {
    202: {"model": DecisionOut},
    404: PROBLEM_RESPONSES[422],
    409: PROBLEM_RESPONSES[422],
    **PROBLEM_RESPONSES,
}


@router.get(
    "/confirmations",
    operation_id="listConfirmations",
    response_class=FastJSONResponse,
    responses={200: {"model": ConfirmationPage}, **LIST_PROBLEMS},
)
async def list_confirmations(
    runtime: RuntimeDep,
    viewer: ConfirmationReader,
    status: Annotated[ConfirmationStatus | None, Query()] = None,
    limit: RunPageLimit = DEFAULT_RUN_PAGE,
    cursor: Cursor = None,
) -> FastJSONResponse:
    after = parse_keyset_cursor(LISTING, cursor)
    if viewer.sees_every_confirmation:
        caller = None
    elif viewer.name is None:  # never: open mode holds every scope
        return FastJSONResponse({"items": [], "next_cursor": None})
    else:
        caller = viewer.name
    page = await runtime.confirmations.list_page(
        limit=limit, after=after, status=status, caller=caller
    )
    return page_answer(page, partial(keyset_cursor, LISTING))


@router.post(
    "/runs/{run_id}/confirmations/{confirmation_id}",
    operation_id="decideConfirmation",
    status_code=202,
    response_class=FastJSONResponse,
    responses=DECISION_RESPONSES,
    openapi_extra=json_body(ConfirmationIn),
)
async def decide(
    run_id: Id, confirmation_id: Id, request: Request, runtime: RuntimeDep, principal: Decider
) -> FastJSONResponse:
    return await decide_confirmation(run_id, confirmation_id, request, runtime, principal.name)


async def decide_confirmation(
    run_id: str, confirmation_id: str, request: Request, runtime: Runtime, decider: str | None
) -> FastJSONResponse:
    """Record the decision; the last one of a run continues it in this process."""
    settings = runtime.settings
    data = await read_json(request, settings.max_body_bytes, settings.max_json_depth)
    body = parse_model(ConfirmationIn, data)
    answer = await record_decision(
        runtime,
        run_id,
        confirmation_id,
        approve=body.approve,
        reason=body.reason,
        decider=decider,
    )
    return FastJSONResponse(answer, status_code=202)


async def record_decision(
    runtime: Runtime,
    run_id: str,
    confirmation_id: str,
    *,
    approve: bool,
    reason: str,
    decider: str | None,
) -> dict[str, Any]:
    """Record a decision, and launch the run's continuation here when it was the last
    one the run waited for; the decision's answer. Raises what `decide` raises."""
    decided = await runtime.confirmations.decide(
        run_id, confirmation_id, approve=approve, reason=reason, decided_by=decider
    )
    if decided.resume is not None:
        runtime.runs.launch(decided.resume)
    return decided.answer
