"""Starting a run over HTTP: shared by every route that starts one.

`Prefer: respond-async` (RFC 7240) answers 202 as soon as preflight passed and
the run is recorded, with `Location: /runs/{run_id}`; otherwise the request
waits for the run (a client that goes away does not stop it). With an
`Idempotency-Key`, the request digest is sha256 over the method, path, response
mode and canonical JSON body: the first request claims the key with its run,
a retry gets the stored response, 409 while the first is still running, 422
when the body differs. The claim is tried first (with the run's start, after
preflight); only a request that finds the key held reads it. A route parses
its body, then calls `start_run` with a function that preflights and records
the run under the claim.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import Request
from starlette.datastructures import Headers
from starlette.responses import Response

from app.api.auth import Principal
from app.api.idempotency import (
    idempotency_key,
    lookup,
    lookup_winner,
    render_exception,
    to_stored,
)
from app.api.problems import PROBLEM_MEDIA_TYPE, PROBLEM_RESPONSES, ProblemOut
from app.api.responses import FastJSONResponse
from app.api.schemas.run_control import RunAcceptedOut
from app.service.errors import IdempotencyKeyTaken, ServiceError, StorageUnavailable
from app.service.idempotency import IdempotencyClaim, StoredResponse, request_digest
from app.service.runs.tasks import RunEnded, RunResult, SupervisedRun
from app.service.runtime import Runtime

RESPOND_ASYNC = "respond-async"
# (the claim, whether the caller is answered only once the run ended) -> the run.
OpenRun = Callable[[IdempotencyClaim | None, bool], Awaitable[SupervisedRun]]

RUN_START_PARAMETERS: list[dict[str, Any]] = [
    {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "description": "Retry safely: the same key and body replay the first response "
        "(Idempotent-Replayed: true); kept at least 24 hours, scoped to the caller.",
        "schema": {"type": "string", "pattern": '^(?!""$)[!-~]([ -~]{0,253}[!-~])?$'},
    },
    {
        "name": "Prefer",
        "in": "header",
        "required": False,
        "description": "respond-async: answer 202 with Location: /runs/{run_id} at once.",
        "schema": {"type": "string"},
    },
]

RUN_START_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {
        "model": RunAcceptedOut,
        "description": "Prefer: respond-async: the run goes on in the background.",
        "headers": {"Location": {"schema": {"type": "string"}}},
    },
    409: {"model": ProblemOut, "content": {PROBLEM_MEDIA_TYPE: {}}},
    **PROBLEM_RESPONSES,
}


def prefers_async(headers: Headers) -> bool:
    for value in headers.getlist("prefer"):
        for preference in value.split(","):
            token = preference.split(";", 1)[0].split("=", 1)[0].strip().lower()
            if token == RESPOND_ASYNC:
                return True
    return False


async def start_run(
    request: Request, runtime: Runtime, principal: Principal, body: Any, open_run: OpenRun
) -> Response:
    respond_async = prefers_async(request.headers)
    key = idempotency_key(request.headers)

    def accepted(run_id: str) -> StoredResponse:
        root = request.scope.get("root_path", "")
        return StoredResponse(
            202,
            {
                "content-type": "application/json",
                "location": f"{root}/runs/{run_id}",
                "preference-applied": RESPOND_ASYNC,
            },
            {"run_id": run_id, "status": "running"},
        )

    if key is None:
        run = await open_run(None, not respond_async)
        return await _execute(runtime, run, accepted if respond_async else None, None)

    mode = RESPOND_ASYNC if respond_async else "wait"
    digest = request_digest(request.method, request.url.path, mode, body)
    claim = runtime.idempotency.claim(
        principal.name,
        key,
        digest,
        accepted if respond_async else None,
        None if respond_async else _answered,
    )
    # The claim comes first and the stored key is read only when it fails: a new
    # key (nearly every request) then costs no read before its run starts.
    try:
        run = await open_run(claim, not respond_async)
    except IdempotencyKeyTaken:
        return await lookup_winner(runtime, claim)
    except ServiceError as exc:
        # Nothing ran. The request's own fault (a preflight 422) is kept and
        # replayed; a server error is not, so that a retry can proceed.
        response = await render_exception(request, exc)
        if response.status_code >= 500:
            # A retry of a request that ended earlier still gets its stored answer.
            replayed = await _stored_answer(runtime, claim)
            if replayed is not None:
                return replayed
            raise
        if not await runtime.idempotency.record(claim, to_stored(response)):
            return await lookup_winner(runtime, claim)
        return response
    return await _execute(runtime, run, claim.accepted, _recorder(request, runtime, claim))


async def _stored_answer(runtime: Runtime, claim: IdempotencyClaim) -> Response | None:
    """The key's stored answer (`lookup`), or None when there is none or it cannot be
    read now; 409 or 422 when the key is in progress or was used otherwise."""
    try:
        return await lookup(runtime, claim)
    except StorageUnavailable:
        return None


async def _execute(
    runtime: Runtime,
    run: SupervisedRun,
    accepted: Callable[[str], StoredResponse] | None,
    on_end: RunEnded | None,
) -> Response:
    if accepted is not None:
        runtime.runs.launch(run)
        answer = accepted(run.run_id)
        return Response(orjson.dumps(answer.body), answer.status, dict(answer.headers))
    result = await runtime.runs.launch(run, on_end=on_end).wait()
    return FastJSONResponse(result.response)


def _recorder(request: Request, runtime: Runtime, claim: IdempotencyClaim) -> RunEnded | None:
    """Store a waited-for run's response; runs in the run's task, so a gone client
    still leaves the key completed. A 202 was stored with the run already."""
    if claim.accepted is not None:
        return None

    async def record(result: RunResult | None, error: BaseException | None) -> None:
        if result is not None and result.key_answered:
            return  # stored with the run's end
        if result is not None:
            response: Response = _answered_response(result.redacted())
        elif isinstance(error, Exception):
            response = await render_exception(request, error)
        else:
            return
        await runtime.idempotency.complete(claim, to_stored(response))

    return record


def _answered_response(body: Any) -> Response:
    """A waited-for run's answer, as it is sent and stored."""
    return FastJSONResponse(body)


def _answered(body: Any) -> StoredResponse:
    """The stored copy of a waited-for run's answer (`body`: its redacted result)."""
    return to_stored(_answered_response(body))
