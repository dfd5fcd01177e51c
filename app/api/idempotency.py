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

from app.service.errors import (
    IDEMPOTENCY_KEY_POINTER,
    IdempotencyKeyTaken,
    InvalidRequest,
    ProblemItem,
)
from app.service.idempotency import IdempotencyClaim, StoredResponse
from app.service.runtime import Runtime

HEADER = "idempotency-key"
REPLAYED = "idempotent-replayed"
MAX_KEY_CHARS = 255


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
        "The Idempotency-Key header is invalid.",
        errors=[ProblemItem(IDEMPOTENCY_KEY_POINTER, message)],
    )


async def lookup(runtime: Runtime, claim: IdempotencyClaim) -> Response | None:
    """The replay of a completed key; None when the key is free. Raises 409 (in
    progress, or never to be answered) or 422."""
    stored = await runtime.idempotency.lookup(claim)
    return None if stored is None else replay(stored)


async def lookup_winner(runtime: Runtime, claim: IdempotencyClaim) -> Response:
    """After losing the race for a key: the winner's outcome."""
    replayed = await lookup(runtime, claim)
    if replayed is None:
        raise IdempotencyKeyTaken(claim.key)
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
