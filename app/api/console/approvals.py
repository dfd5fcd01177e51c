"""`/console/confirmations`: the calls waiting for a person, and the forms that decide
them, through the same service as `GET /confirmations` and
`POST /runs/{run_id}/confirmations/{confirmation_id}`."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from app.api.auth.principal import CONFIRMATIONS_DECIDE, RUNS_READ
from app.api.confirmations import LISTING, record_decision
from app.api.console import forms
from app.api.console.pages import PAGE, render
from app.api.console.session_deps import BASE, ConsoleSession, ScopeMissing, csrf_checked
from app.api.console.sessions import Session
from app.api.deps import RuntimeDep
from app.api.pagination import keyset_cursor, parse_keyset_cursor
from app.service.errors import (
    ConfirmationConflict,
    ConfirmationNotFound,
    InvalidRequest,
    RouterUnavailable,
)

router = APIRouter(prefix=BASE, include_in_schema=False)

CONFIRMATION_STATUSES = ("pending", "approved", "rejected", "refused", "expired")
MAX_REASON = 2000
NOTICES = {
    "approved": "Approved: the run goes on once nothing else in it waits.",
    "rejected": "Rejected: the call is denied and what follows it in its lane is skipped.",
    "conflict": "That call was already decided, or its run changed meanwhile.",
    "missing": "There is no such waiting call.",
    "unavailable": "Router runs cannot be decided while the router is unavailable.",
}
Anyone = Annotated[Session, Depends(ConsoleSession())]
Decider = Annotated[Session, Depends(ConsoleSession(CONFIRMATIONS_DECIDE))]


@router.get("/confirmations")
async def confirmations_page(request: Request, runtime: RuntimeDep, session: Anyone) -> Response:
    principal = session.principal
    if not (principal.has(RUNS_READ) or principal.has(CONFIRMATIONS_DECIDE)):
        raise ScopeMissing(session, RUNS_READ)
    params = dict(request.query_params)
    problems: list[str] = []
    shown = forms.choice(params, "status", CONFIRMATION_STATUSES, problems) or "pending"
    items: list[dict[str, object]] = []
    next_url = None
    try:
        after = parse_keyset_cursor(LISTING, params.get("cursor") or None)
    except InvalidRequest:
        problems.append("cursor: not a cursor of this list; start from the first page")
    if not problems:
        page = await runtime.confirmations.list_page(
            limit=PAGE,
            after=after,
            status=shown,
            caller=None if principal.sees_every_confirmation else principal.name,
        )
        items = page.items
        if page.next is not None:
            cursor = keyset_cursor(LISTING, page.next)
            next_url = f"{BASE}/confirmations?{urlencode({'status': shown, 'cursor': cursor})}"
    return render(
        request,
        session,
        "confirmations.html",
        422 if problems else 200,
        title="Approvals",
        section="confirmations",
        confirmations=items,
        confirmation_statuses=CONFIRMATION_STATUSES,
        shown_status=shown,
        problems=problems,
        may_decide=principal.has(CONFIRMATIONS_DECIDE),
        next_url=next_url,
        notice=NOTICES.get(params.get("done", "")),
    )


@router.post("/runs/{run_id}/confirmations/{confirmation_id}")
async def decide(
    request: Request, run_id: str, confirmation_id: str, runtime: RuntimeDep, session: Decider
) -> Response:
    form = await csrf_checked(request, session)
    decision = form.get("decision")
    if decision not in ("approve", "reject"):
        return render(
            request,
            session,
            "error.html",
            422,
            title="Invalid decision",
            detail="Choose Approve or Reject.",
        )
    try:
        await record_decision(
            runtime,
            run_id,
            confirmation_id,
            approve=decision == "approve",
            reason=form.get("reason", "")[:MAX_REASON],
            decider=session.principal.name,
        )
        done = "approved" if decision == "approve" else "rejected"
    except ConfirmationNotFound:
        done = "missing"
    except ConfirmationConflict:
        done = "conflict"
    except RouterUnavailable:
        done = "unavailable"
    return RedirectResponse(f"{BASE}/confirmations?done={done}", status_code=303)
