"""RFC 9457 problem details: every error the API returns is one of these.

Expected failures are `ServiceError`s (`app.service.errors`, whose docstring
draws the tree): each carries its status, type and title, and one handler
renders them all. The API adds the leaves only HTTP knows of:

ServiceError
 ├── Unauthorized          401  unauthorized: no API key, or one the service does not know
 ├── InsufficientScope     403  forbidden: a valid key without the scope the route needs
 ├── PayloadTooLarge       413  payload-too-large
 └── TooManyRequests       429  too-many-requests: carries Retry-After

What FastAPI and Starlette raise themselves (a request that fails validation, an
unknown route) is rendered in the same shape; anything else is a logged 500.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.service.errors import (
    PROBLEM_TYPE,
    ProblemItem,
    ServiceError,
    StorageUnavailable,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"
logger = logging.getLogger("toolloop.api")


class Challenged(ServiceError):
    """A refusal of the request's credentials, with the challenge to answer
    (`WWW-Authenticate`, RFC 6750)."""

    def __init__(self, detail: str, *, challenge: str) -> None:
        super().__init__(detail)
        self.challenge = challenge


class Unauthorized(Challenged):
    status = 401
    type = PROBLEM_TYPE + "unauthorized"
    title = HTTPStatus.UNAUTHORIZED.phrase


class InsufficientScope(Challenged):
    status = 403
    type = PROBLEM_TYPE + "forbidden"
    title = HTTPStatus.FORBIDDEN.phrase


class PayloadTooLarge(ServiceError):
    status = 413
    type = PROBLEM_TYPE + "payload-too-large"
    title = HTTPStatus.REQUEST_ENTITY_TOO_LARGE.phrase


class TooManyRequests(ServiceError):
    status = 429
    type = PROBLEM_TYPE + "too-many-requests"
    title = HTTPStatus.TOO_MANY_REQUESTS.phrase


class ProblemOut(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, str]] | None = None


PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ProblemOut, "content": {PROBLEM_MEDIA_TYPE: {}}} for status in (413, 422, 503)
}


def problem_body(
    status: int,
    type_: str,
    title: str,
    detail: str,
    errors: Sequence[ProblemItem] = (),
    members: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        **(members or {}),
        "type": type_,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = [{"pointer": e.pointer, "message": e.message} for e in errors]
    return body


def problem_response(
    status: int,
    slug: str,
    detail: str,
    errors: Sequence[ProblemItem] = (),
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A problem that is no `ServiceError` (a transport refusal, FastAPI's own)."""
    body = problem_body(status, PROBLEM_TYPE + slug, HTTPStatus(status).phrase, detail, errors)
    return _response(body, headers)


def _response(body: dict[str, Any], headers: Mapping[str, str] | None) -> JSONResponse:
    return JSONResponse(
        body, status_code=body["status"], media_type=PROBLEM_MEDIA_TYPE, headers=dict(headers or {})
    )


def pointer_from_loc(loc: Sequence[str | int]) -> str:
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return "".join(f"/{p}" for p in escaped)


async def _on_service_error(request: Request, exc: Exception) -> JSONResponse:
    """The one rendering of every expected failure."""
    assert isinstance(exc, ServiceError)
    if isinstance(exc, StorageUnavailable):
        logger.warning("storage unavailable on %s %s: %s", request.method, request.url.path, exc)
    headers: dict[str, str] = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(exc.retry_after_s)
    if isinstance(exc, Challenged):
        headers["WWW-Authenticate"] = exc.challenge
    body = problem_body(exc.status, exc.type, exc.title, exc.detail, exc.errors, exc.members)
    return _response(body, headers)


async def _on_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    items = [
        ProblemItem(pointer_from_loc(err.get("loc", ())), str(err.get("msg", "invalid")))
        for err in exc.errors()
    ]
    return problem_response(422, "invalid-request", "The request is invalid.", items)


async def _on_http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    slug = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "-")
    return problem_response(exc.status_code, slug, str(exc.detail), headers=exc.headers)


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.error(
        "unhandled error on %s %s: %s",
        request.method,
        request.url.path,
        type(exc).__name__,
        exc_info=exc,
    )
    return problem_response(500, "internal-error", "The service failed to handle this request.")


async def _on_database_unreachable(request: Request, exc: Exception) -> JSONResponse:
    """A connection-level failure (server restarting, network gone) is transient."""
    return await _on_service_error(request, StorageUnavailable(type(exc).__name__))


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, _on_service_error)
    app.add_exception_handler(OperationalError, _on_database_unreachable)
    app.add_exception_handler(InterfaceError, _on_database_unreachable)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(Exception, _on_unexpected)
