"""Every expected failure, whichever layer raised it, is rendered by the one handler:
its status, type and title, the detail its caller is told, and nothing more."""

from __future__ import annotations

import importlib
import pkgutil

import httpx
import pytest
from fastapi import FastAPI

import app.service
from app.api import problems
from app.api.problems import (
    PROBLEM_MEDIA_TYPE,
    InsufficientScope,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
    install_problem_handlers,
)
from app.engine.preflight import PlanProblem
from app.service import errors as e
from app.temporal.handles import ExecutorUnavailable

SAMPLES: list[e.ServiceError] = [
    e.InvalidRequest("The request is invalid.", errors=[e.ProblemItem("/a", "bad")]),
    e.PlanRejected([PlanProblem("/calls/0", "unknown tool")]),
    e.RouterRequestRejected([PlanProblem("/tools", "empty")]),
    e.RequestMismatch("r1"),
    e.IdempotencyKeyReused("k"),
    e.Forbidden("Without API keys, the MCP endpoint answers only loopback origins."),
    e.CancelForbidden("r1"),
    e.ResumeForbidden("r1"),
    e.NotFound("There is no owner with this name."),
    e.RunNotFound("r1"),
    e.ConfirmationNotFound("no run 'r1'"),
    e.Conflict("a conflict"),
    e.ConfirmationConflict("the confirmation is already approved"),
    e.ConfirmationContractChanged("the contract changed since this confirmation was requested"),
    e.RunNotCancellable("not cancellable"),
    e.RunAlreadyEnded("r1", "succeeded"),
    e.RunRunningElsewhere("r1"),
    e.RunNotResumable("r1", "it is succeeded; only an interrupted run resumes"),
    e.ContractChanged("run r1 was admitted against contract a, the service now runs b"),
    e.IdempotencyKeyInUse("r1"),
    e.IdempotencyKeyTaken("k"),
    e.IdempotencyKeyUnanswered("r1", "interrupted"),
    e.ServiceUnavailable("The service is waiting for its database; retry later.", retry_after_s=5),
    e.RouterUnavailable(["/etc/secret/profiles.yaml: missing"]),
    e.CancelUnconfirmed("r1", 10.0),
    e.StorageUnavailable("(psycopg) connection to 10.1.2.3:5432 refused"),
    ExecutorUnavailable("Failed client connect: 10.1.2.3:7233 refused"),
    Unauthorized("The API key is not valid.", challenge='Bearer error="invalid_token"'),
    InsufficientScope("This API key lacks the 'admin' scope.", challenge="Bearer"),
    PayloadTooLarge("The request body exceeds the limit of 10 bytes."),
    TooManyRequests("Too many failed authentication attempts.", retry_after_s=7),
]


def every_subclass(root: type[e.ServiceError]) -> set[type[e.ServiceError]]:
    found: set[type[e.ServiceError]] = set()
    waiting = list(root.__subclasses__())
    while waiting:
        cls = waiting.pop()
        found.add(cls)
        waiting.extend(cls.__subclasses__())
    return found


def test_the_samples_cover_every_error_of_the_service_and_the_api() -> None:
    for module in pkgutil.walk_packages(app.service.__path__, "app.service."):
        importlib.import_module(module.name)
    importlib.import_module(problems.__name__)
    defined = {
        cls
        for cls in every_subclass(e.ServiceError)
        if cls.__module__.startswith("app.") and cls is not problems.Challenged
    }

    assert defined == {type(sample) for sample in SAMPLES}


@pytest.fixture
async def client() -> httpx.AsyncClient:
    api = FastAPI()
    install_problem_handlers(api)

    @api.get("/fail/{index}")
    async def fail(index: int) -> None:
        raise SAMPLES[index]

    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


@pytest.mark.parametrize("index", range(len(SAMPLES)), ids=lambda i: type(SAMPLES[i]).__name__)
async def test_each_error_renders_as_its_problem(client: httpx.AsyncClient, index: int) -> None:
    error = SAMPLES[index]

    async with client:
        response = await client.get(f"/fail/{index}")

    assert response.status_code == error.status
    assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
    expected = {
        **error.members,
        "type": error.type,
        "title": error.title,
        "status": error.status,
        "detail": error.detail,
    }
    if error.errors:
        expected["errors"] = [{"pointer": i.pointer, "message": i.message} for i in error.errors]
    assert response.json() == expected
    retry_after = response.headers.get("retry-after")
    assert retry_after == (None if error.retry_after_s is None else str(error.retry_after_s))
    challenge = getattr(error, "challenge", None)
    assert response.headers.get("www-authenticate") == challenge
    for leaked in ("10.1.2.3", "psycopg", "/etc/secret", "Traceback"):
        assert leaked not in response.text


def test_the_bodies_the_contract_names() -> None:
    def rendered(error: e.ServiceError) -> tuple[int, str, str]:
        return (error.status, error.type.rsplit(":", 1)[1], error.detail)

    assert rendered(e.RunAlreadyEnded("r1", "succeeded")) == (
        409,
        "run-not-cancellable",
        "The run already ended: succeeded.",
    )
    assert rendered(e.RunNotFound("r1")) == (404, "not-found", "There is no run with this id.")
    assert rendered(e.ConfirmationContractChanged("x"))[:2] == (409, "contract-changed")
    assert rendered(e.IdempotencyKeyTaken("k"))[:2] == (409, "idempotency-key-in-use")
    assert rendered(e.RouterRequestRejected([]))[:2] == (422, "invalid-request")
    assert rendered(e.StorageUnavailable("x")) == (
        503,
        "storage-unavailable",
        "The database is unavailable; retry later.",
    )
