"""RFC 9457 problem details: every error the API returns is one of these.

ProblemError
 ├── InvalidRequest          422  the request names every problem in `errors`
 ├── Unauthorized            401  no API key, or one the service does not know
 ├── Forbidden               403  a valid key without the scope the route needs
 ├── NotFound                404
 ├── PayloadTooLarge         413
 ├── TooManyRequests         429  carries Retry-After
 └── ServiceUnavailable      503  dependency down or feature failed closed
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.service.errors import PlanRejected, StorageUnavailable

PROBLEM_MEDIA_TYPE = "application/problem+json"
logger = logging.getLogger("toolloop.api")


@dataclass(frozen=True, slots=True)
class ProblemItem:
    pointer: str
    message: str


class ProblemError(Exception):
    status: int = 500
    slug: str = "internal-error"

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[ProblemItem] = (),
        headers: Mapping[str, str] | None = None,
        members: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = list(errors)
        self.headers = dict(headers or {})
        # RFC 9457 extension members a client acts on (e.g. the `run_id` to read).
        self.members = dict(members or {})


class InvalidRequest(ProblemError):
    status = 422
    slug = "invalid-request"


class Unauthorized(ProblemError):
    status = 401
    slug = "unauthorized"


class Forbidden(ProblemError):
    status = 403
    slug = "forbidden"


class TooManyRequests(ProblemError):
    status = 429
    slug = "too-many-requests"


class NotFound(ProblemError):
    status = 404
    slug = "not-found"


class PayloadTooLarge(ProblemError):
    status = 413
    slug = "payload-too-large"


class ServiceUnavailable(ProblemError):
    status = 503
    slug = "service-unavailable"


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
    slug: str,
    detail: str,
    errors: Sequence[ProblemItem] = (),
    members: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        **(members or {}),
        "type": f"urn:toolloop:problem:{slug}",
        "title": HTTPStatus(status).phrase,
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
    members: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        problem_body(status, slug, detail, errors, members),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=dict(headers or {}),
    )


def pointer_from_loc(loc: Sequence[str | int]) -> str:
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return "".join(f"/{p}" for p in escaped)


async def _on_problem(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return problem_response(exc.status, exc.slug, exc.detail, exc.errors, exc.headers, exc.members)


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


async def _on_plan_rejected(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PlanRejected)
    items = [ProblemItem(problem.pointer, problem.message) for problem in exc.problems]
    return problem_response(422, "plan-rejected", "The plan was rejected; nothing ran.", items)


# What a 503 says of the database: the cause (driver text, SQL, where the database
# lives) goes to the log only.
DATABASE_UNAVAILABLE = "The database is unavailable; retry later."


async def _on_storage_unavailable(request: Request, exc: Exception) -> JSONResponse:
    logger.warning("storage unavailable on %s %s: %s", request.method, request.url.path, exc)
    return problem_response(
        503, "storage-unavailable", DATABASE_UNAVAILABLE, headers={"Retry-After": "5"}
    )


async def _on_database_unreachable(_: Request, exc: Exception) -> JSONResponse:
    logger.warning("database unavailable: %s", type(exc).__name__)
    return problem_response(
        503, "storage-unavailable", DATABASE_UNAVAILABLE, headers={"Retry-After": "5"}
    )


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ProblemError, _on_problem)
    app.add_exception_handler(PlanRejected, _on_plan_rejected)
    app.add_exception_handler(StorageUnavailable, _on_storage_unavailable)
    # Connection-level failures (server restarting, network gone) are transient.
    app.add_exception_handler(OperationalError, _on_database_unreachable)
    app.add_exception_handler(InterfaceError, _on_database_unreachable)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(Exception, _on_unexpected)
