"""`POST /runs/{run_id}/cancel` and `GET /runs/{run_id}/events` (Server-Sent Events).

Cancelling needs the scope that starts that kind of run and to be the run's
creator, or `admin`; a router run waiting for confirmation can be cancelled
too (its waiting calls are refused). The events stream sends every receipt of
the run once, as it becomes durable (`event: receipt`, the stored redacted
copy), in completion order, then `event: end` with `{"run_id", "status"}`, and
closes; a late client first gets what already happened. Comment lines keep
idle connections alive. On PostgreSQL both work whichever instance gets the
request: a cancel is carried out by the instance executing the run, and its
events are relayed. When the service shuts down, its runs end
`interrupted` (`end`); a stream of a run executing in another instance ends
with `event: shutdown` (`{"run_id", "status", "detail"}`): reconnect.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Annotated

import orjson
from fastapi import APIRouter, Path
from fastapi.responses import StreamingResponse

from app.api.auth import (
    ADMIN,
    PLANS_EXECUTE,
    ROUTER_RUN,
    Principal,
    RunController,
    RunsReader,
)
from app.api.deps import RuntimeDep
from app.api.problems import PROBLEM_MEDIA_TYPE, ProblemOut
from app.api.responses import FastJSONResponse
from app.api.schemas.run_control import RunStatusOut
from app.api.schemas.runs import RUN_PROBLEMS, Text
from app.service.runs.control import RunControl
from app.service.runs.stream import RunEvent, RunEventStream

router = APIRouter(prefix="/runs", tags=["runs"])

RunPath = Annotated[Text, Path()]
START_SCOPES = {
    "sequential": PLANS_EXECUTE,
    "parallel": PLANS_EXECUTE,
    "router": ROUTER_RUN,
    "mcp": PLANS_EXECUTE,
}
HEARTBEAT = b": keep-alive\n\n"
_PROBLEM = {"model": ProblemOut, "content": {PROBLEM_MEDIA_TYPE: {}}}


def control_rule(principal: Principal) -> Callable[[str, str | None], bool]:
    """Who may cancel or resume a run: its creator holding the scope that starts
    that kind of run, or `admin`."""

    def may_cancel(kind: str, created_by: str | None) -> bool:
        if principal.has(ADMIN):
            return True
        scope = START_SCOPES.get(kind)
        return (
            principal.name is not None
            and created_by == principal.name
            and scope is not None
            and principal.has(scope)
        )

    return may_cancel


@router.post(
    "/{run_id}/cancel",
    operation_id="cancelRun",
    response_class=FastJSONResponse,
    responses={200: {"model": RunStatusOut}, **RUN_PROBLEMS, 409: _PROBLEM},
)
async def cancel_run(
    runtime: RuntimeDep, principal: RunController, run_id: RunPath
) -> FastJSONResponse:
    def cancel_paused_router_run(paused_run_id: str) -> Awaitable[str | None]:
        return runtime.router.cancel_paused(paused_run_id, principal.name)

    def cancel_paused_plan_run(paused_run_id: str) -> Awaitable[str | None]:
        return runtime.confirmations.cancel_paused(paused_run_id, principal.name)

    control = RunControl(
        runtime.sessions,
        runtime.runs,
        cancel_paused={
            "router": cancel_paused_router_run,
            "sequential": cancel_paused_plan_run,
            "parallel": cancel_paused_plan_run,
        },
        stop_elsewhere=runtime.stop_elsewhere,
    )
    status = await control.cancel(run_id, principal, control_rule(principal))
    return FastJSONResponse({"run_id": run_id, "status": status})


@router.get(
    "/{run_id}/events",
    operation_id="streamRunEvents",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "text/event-stream: `receipt` events, then one `end` event "
            "(or, when this instance shuts down while the run goes on in another, one "
            "`shutdown` event).",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **RUN_PROBLEMS,
    },
)
async def stream_run_events(
    runtime: RuntimeDep, viewer: RunsReader, run_id: RunPath
) -> StreamingResponse:
    settings = runtime.settings
    stream = RunEventStream(
        runtime.sessions,
        runtime.events,
        runtime.runs,
        heartbeat_s=settings.run_events_heartbeat_s,
        poll_s=settings.run_events_poll_s,
        follow=None if runtime.replicas is None else runtime.replicas.follow,
    )
    events = await stream.open(run_id, viewer)
    return StreamingResponse(
        server_sent_events(events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def server_sent_events(events: AsyncGenerator[RunEvent, None]) -> AsyncIterator[bytes]:
    async with aclosing(events):
        async for event in events:
            if event.kind == "heartbeat":
                yield HEARTBEAT
            else:
                data = orjson.dumps(event.data, option=orjson.OPT_NON_STR_KEYS)
                yield b"event: " + event.kind.encode() + b"\ndata: " + data + b"\n\n"
