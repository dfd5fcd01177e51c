"""The `Idempotency-Key` header (draft-ietf-httpapi-idempotency-key-header) over HTTP.

The key is an sf-string (`"..."`) or a bare token: 1-255 printable ASCII
characters. A replay is the stored response (status, headers, body) with
`Idempotent-Replayed: true`.
"""

from __future__ import annotations

import inspect
from typing import Any

import orjson
from fastapi import Request
from starlette.datastructures import Headers
from starlette.responses import Response

from app.api.problems import InvalidRequest, ProblemError, ProblemItem
from app.service.idempotency import (
    IdempotencyClaim,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    IdempotencyKeyUnanswered,
    StoredResponse,
)
from app.service.runtime import Runtime

HEADER = "idempotency-key"
REPLAYED = "idempotent-replayed"
MAX_KEY_CHARS = 255
_POINTER = f"/{HEADER}"


class KeyInUse(ProblemError):
    status = 409
    slug = "idempotency-key-in-use"


class KeyUnanswered(ProblemError):
    status = 409
    slug = "idempotency-key-unanswered"


class KeyReused(ProblemError):
    status = 422
    slug = "idempotency-key-reused"


def idempotency_key(headers: Headers) -> str | None:
    values = headers.getlist(HEADER)
    if not values:
        return None
    if len(values) > 1:
        raise _invalid("send one Idempotency-Key header")
    value = values[0].strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    if not 0 < len(value) <= MAX_KEY_CHARS:
        raise _invalid(f"the key must have 1 to {MAX_KEY_CHARS} characters")
    if not all(" " <= char <= "~" for char in value):
        raise _invalid("the key must be printable ASCII")
    return value


def _invalid(message: str) -> InvalidRequest:
    return InvalidRequest(
        "The Idempotency-Key header is invalid.", errors=[ProblemItem(_POINTER, message)]
    )


async def lookup(runtime: Runtime, claim: IdempotencyClaim) -> Response | None:
    """The replay of a completed key; None when the key is free. Raises 409 (in
    progress, or never to be answered) or 422."""
    try:
        stored = await runtime.idempotency.lookup(claim)
    except IdempotencyKeyReused:
        raise KeyReused(
            "This Idempotency-Key was already used for a different request.",
            errors=[ProblemItem(_POINTER, "reused with a different method, path, body or Prefer")],
        ) from None
    except IdempotencyKeyUnanswered as exc:
        # No Retry-After: no retry of this key will ever be answered.
        raise KeyUnanswered(
            f"The first request with this Idempotency-Key started run {exc.run_id}, which "
            f"stopped ({exc.run_status}) before its response was stored, and no retry "
            f"will be answered. GET /runs/{exc.run_id} shows the run and its receipts; "
            f"an interrupted plan resumes with POST /runs/{exc.run_id}/resume and the "
            "original body.",
            members={"run_id": exc.run_id, "run_status": exc.run_status},
        ) from None
    except IdempotencyKeyInUse as exc:
        running = "" if exc.run_id is None else f" (run {exc.run_id})"
        raise KeyInUse(
            f"The first request with this Idempotency-Key is still in progress{running}.",
            headers={"Retry-After": "1"},
        ) from None
    return None if stored is None else replay(stored)


async def lookup_winner(runtime: Runtime, claim: IdempotencyClaim) -> Response:
    """After losing the race for a key: the winner's outcome."""
    replayed = await lookup(runtime, claim)
    if replayed is None:
        raise KeyInUse(
            "A concurrent request with this Idempotency-Key is in progress.",
            headers={"Retry-After": "1"},
        )
    return replayed


def replay(stored: StoredResponse) -> Response:
    return Response(
        orjson.dumps(stored.body),
        status_code=stored.status,
        headers={**stored.headers, REPLAYED: "true"},
    )


def to_stored(response: Response) -> StoredResponse:
    headers = {k: v for k, v in response.headers.items() if k != "content-length"}
    return StoredResponse(response.status_code, headers, orjson.loads(response.body))


async def render_exception(request: Request, exc: Exception) -> Response:
    """The response the app's exception handlers give `exc` (the one a client would get)."""
    handlers: dict[Any, Any] = request.app.exception_handlers
    for cls in type(exc).__mro__:
        handler = handlers.get(cls)
        if handler is not None:
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
            assert isinstance(response, Response)
            return response
    raise exc
