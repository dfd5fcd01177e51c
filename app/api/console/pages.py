"""`/console`: the operators' pages, rendered on the server from the same service
functions as the API (`ReadService`, `RunControl`, the catalog), with the same scopes and
the same per-caller visibility (someone else's run is 404 here too)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from fastapi.templating import Jinja2Templates

from app.api.auth.principal import RUNS_READ, Principal
from app.api.console import forms
from app.api.console.charts import bar_chart
from app.api.console.session_deps import (
    BASE,
    ConsoleSession,
    csrf_checked,
    keys_configured,
    with_session_cookie,
)
from app.api.console.sessions import Session
from app.api.console.timeline import lane_timeline
from app.api.deps import RuntimeDep
from app.api.pagination import keyset_cursor, parse_keyset_cursor
from app.api.run_control import START_SCOPES, control_rule, server_sent_events
from app.service.catalog import describe_contract
from app.service.errors import (
    CancelForbidden,
    CancelUnconfirmed,
    InvalidRequest,
    RunAlreadyEnded,
    RunNotFound,
    RunRunningElsewhere,
)
from app.service.runs.control import RunControl
from app.service.runs.reads import (
    RECEIPT_STATUSES,
    Keyset,
    Listing,
    ReadService,
    ReceiptFilters,
    RunFilters,
)
from app.service.runs.stream import RunEventStream
from app.service.runs.tool_health import MAX_SAMPLE, read_health

router = APIRouter(prefix=BASE, include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).with_name("templates"))
templates.env.filters["pretty"] = lambda value: json.dumps(
    value, indent=2, ensure_ascii=False, sort_keys=True, default=str
)

PAGE = 50
RUN_RECEIPTS = 1000
RUN_KINDS = ("sequential", "parallel", "router")
RUN_STATUSES = (
    "running", "pending", "succeeded", "failed", "interrupted", "cancelled",
    "done", "incomplete", "error",
)  # fmt: skip
NOTICES = {
    "cancelled": "The run was cancelled.",
    "ended": "The run had already ended.",
    "elsewhere": "The run executes in another service instance; only that instance can cancel it.",
    "forbidden": "Your key may not cancel this run.",
    "unconfirmed": "The instance executing the run did not confirm the cancel in time; "
    "it may still take effect.",
}
Reader = Annotated[Session, Depends(ConsoleSession(RUNS_READ))]
Anyone = Annotated[Session, Depends(ConsoleSession())]


def render(
    request: Request, session: Session | None, template: str, status: int = 200, **context: Any
) -> Response:
    context.setdefault("title", template.removesuffix(".html").capitalize())
    context.update(base=BASE, session=session, signed_in=keys_configured(request))
    response = templates.TemplateResponse(request, template, context, status_code=status)
    return with_session_cookie(request, response, session)


def not_found(request: Request, session: Session) -> Response:
    return render(
        request,
        session,
        "error.html",
        404,
        title="Not found",
        detail="There is no run with this id.",
    )


async def _keyset_page(
    name: str,
    params: dict[str, str],
    problems: list[str],
    read: Callable[[Keyset | None], Awaitable[Listing[Keyset]]],
) -> tuple[list[dict[str, Any]], dict[str, str], str | None]:
    """One page of the list `name` (also its console path), read only when the filters
    had no problem: its items, the filters to show again, and the next page's URL."""
    shown = {k: v for k, v in params.items() if k != "cursor" and v}
    if problems:
        return [], shown, None
    try:
        after = parse_keyset_cursor(name, params.get("cursor") or None)
    except InvalidRequest:
        problems.append("cursor: not a cursor of this list; start from the first page")
        return [], shown, None
    listing = await read(after)
    if listing.next is None:
        return listing.items, shown, None
    cursor = keyset_cursor(name, listing.next)
    return listing.items, shown, f"{BASE}/{name}?{urlencode({**shown, 'cursor': cursor})}"


@router.get("")
async def home() -> RedirectResponse:
    return RedirectResponse(f"{BASE}/runs", status_code=303)


@router.get("/runs")
async def runs_page(request: Request, runtime: RuntimeDep, session: Reader) -> Response:
    params = dict(request.query_params)
    problems: list[str] = []
    filters = RunFilters(
        owner=forms.text(params, "owner"),
        status=forms.choice(params, "status", RUN_STATUSES, problems),
        kind=forms.choice(params, "kind", RUN_KINDS, problems),
        caller=forms.text(params, "caller"),
        since=forms.moment(params, "since", problems),
        until=forms.moment(params, "until", problems),
    )
    runs, shown, next_url = await _keyset_page(
        "runs",
        params,
        problems,
        lambda after: ReadService(runtime.sessions).list_runs(
            filters, session.principal, limit=PAGE, after=after
        ),
    )
    return render(
        request,
        session,
        "runs.html",
        422 if problems else 200,
        section="runs",
        runs=runs,
        filters=shown,
        kinds=RUN_KINDS,
        statuses=RUN_STATUSES,
        problems=problems,
        any_running=any(run["status"] == "running" for run in runs),
        refresh_url=str(request.url),
        next_url=next_url,
    )


@router.get("/runs/{run_id}")
async def run_page(request: Request, run_id: str, runtime: RuntimeDep, session: Reader) -> Response:
    reads = ReadService(runtime.sessions)
    try:
        run = await reads.get_run(run_id, session.principal)
        receipts = await reads.list_run_receipts(
            run_id, session.principal, limit=RUN_RECEIPTS, after_seq=None
        )
        audit = await reads.list_run_audit(
            run_id, session.principal, limit=RUN_RECEIPTS, after_id=None
        )
    except RunNotFound:
        return not_found(request, session)
    running = run["status"] == "running"
    notice = NOTICES.get(request.query_params.get("done", ""))
    return render(
        request,
        session,
        "run.html",
        section="runs",
        title=f"Run {run_id[:12]}",
        run=run,
        receipts=receipts.items,
        audit=audit.items,
        turns=[e for e in audit.items if e["kind"].startswith("router.")],
        timeline=lane_timeline(receipts.items),
        receipt_statuses=RECEIPT_STATUSES,
        live=running,
        may_cancel=running and _may_cancel(session.principal, run),
        notice=notice,
    )


def _may_cancel(principal: Principal, run: dict[str, Any]) -> bool:
    return run["kind"] in START_SCOPES and control_rule(principal)(run["kind"], run["caller"])


@router.get("/runs/{run_id}/events")
async def run_events(
    request: Request, run_id: str, runtime: RuntimeDep, session: Reader
) -> Response:
    settings = runtime.settings
    stream = RunEventStream(
        runtime.sessions,
        runtime.events,
        runtime.runs,
        heartbeat_s=settings.run_events_heartbeat_s,
        poll_s=settings.run_events_poll_s,
        follow=None if runtime.replicas is None else runtime.replicas.follow,
    )
    try:
        events = await stream.open(run_id, session.principal)
    except RunNotFound:
        return not_found(request, session)
    return StreamingResponse(
        server_sent_events(events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/runs/{run_id}/cancel")
async def cancel_run(
    request: Request, run_id: str, runtime: RuntimeDep, session: Reader
) -> Response:
    await csrf_checked(request, session)
    principal = session.principal

    def cancel_paused_router_run(paused_run_id: str) -> Any:
        return runtime.router.cancel_paused(paused_run_id, principal.name)

    control = RunControl(
        runtime.sessions,
        runtime.runs,
        cancel_paused={"router": cancel_paused_router_run},
        stop_elsewhere=runtime.stop_elsewhere,
    )
    try:
        await control.cancel(run_id, principal, control_rule(principal))
        done = "cancelled"
    except RunNotFound:
        return not_found(request, session)
    except CancelForbidden:
        done = "forbidden"
    except RunAlreadyEnded:
        done = "ended"
    except RunRunningElsewhere:
        done = "elsewhere"
    except CancelUnconfirmed:
        done = "unconfirmed"
    return RedirectResponse(f"{BASE}/runs/{run_id}?done={done}", status_code=303)


@router.get("/receipts")
async def receipts_page(request: Request, runtime: RuntimeDep, session: Reader) -> Response:
    params = dict(request.query_params)
    problems: list[str] = []
    filters = ReceiptFilters(
        run_id=forms.text(params, "run_id"),
        tool=forms.text(params, "tool"),
        owner=forms.text(params, "owner"),
        status=forms.choice(params, "status", RECEIPT_STATUSES, problems),
        item_key=forms.text(params, "item_key"),
        cache_hit=forms.flag(params, "cache_hit", problems),
        since=forms.moment(params, "since", problems),
        until=forms.moment(params, "until", problems),
    )
    receipts, shown, next_url = await _keyset_page(
        "receipts",
        params,
        problems,
        lambda after: ReadService(runtime.sessions).list_receipts(
            filters, session.principal, limit=PAGE, after=after
        ),
    )
    return render(
        request,
        session,
        "receipts.html",
        422 if problems else 200,
        section="receipts",
        receipts=receipts,
        filters=shown,
        receipt_statuses=RECEIPT_STATUSES,
        problems=problems,
        next_url=next_url,
    )


@router.get("/tools")
async def tools_page(request: Request, runtime: RuntimeDep, session: Reader) -> Response:
    health = await read_health(runtime.sessions, session.principal)
    charts = {
        tool: bar_chart(
            h.calls_per_hour, h.failures_per_hour, f"{tool}: calls per hour over the last day"
        )
        for tool, h in health.tools.items()
    }
    return render(
        request,
        session,
        "tools.html",
        section="tools",
        catalog=describe_contract(runtime.contract),
        health=health,
        charts=charts,
        sample=MAX_SAMPLE,
        everyone=session.principal.can_read_all_runs,
    )
