from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request

from app.api.auth.dependencies import (
    Caller,
    MetricsReader,
    PlansCaller,
    RunsReader,
    install_auth,
    require_scope,
)
from app.api.auth.keyring import KeyRing
from app.api.auth.keys_file import create_key, load_keys
from app.api.auth.principal import ADMIN, PLANS_EXECUTE, RUNS_READ_ALL
from app.api.auth.throttle import FailedAuthThrottle
from app.api.problems import PROBLEM_MEDIA_TYPE, install_problem_handlers

CHALLENGE = 'Bearer realm="toolloop"'


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def build_app(keyring: KeyRing | None, throttle: FailedAuthThrottle | None = None) -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)
    install_auth(app, keyring, throttle)

    @app.post("/plans")
    async def plans(caller: PlansCaller) -> dict[str, object]:
        return {"name": caller.name}

    @app.get("/runs")
    async def runs(caller: RunsReader) -> dict[str, object]:
        return {"all": caller.can_read_all_runs}

    @app.get("/metrics")
    async def metrics(
        _: MetricsReader, again: MetricsReader, request: Request
    ) -> dict[str, object]:
        return {"cached": request.state.principal is again}

    @app.get("/whoami")
    async def whoami(caller: Caller) -> dict[str, object]:
        return {"name": caller.name}

    return app


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def keys_path(tmp_path: Path) -> Path:
    return tmp_path / "keys.yml"


@pytest.fixture
def keys(keys_path: Path) -> dict[str, str]:
    return {
        "worker": create_key(keys_path, "worker", [PLANS_EXECUTE]),
        "operator": create_key(keys_path, "operator", [RUNS_READ_ALL]),
        "admin": create_key(keys_path, "root", [ADMIN]),
    }


@pytest.fixture
async def client(
    keys: dict[str, str], keys_path: Path, clock: FakeClock
) -> AsyncIterator[httpx.AsyncClient]:
    throttle = FailedAuthThrottle(burst=2, per_minute=6, clock=clock)
    app = build_app(load_keys(keys_path), throttle)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def assert_problem(response: httpx.Response, status: int, slug: str) -> None:
    assert response.status_code == status
    assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
    body = response.json()
    assert body["status"] == status
    assert body["type"] == f"urn:toolloop:problem:{slug}"
    assert body["detail"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic dXNlcjpwdw=="}, bearer("")])
async def test_no_key_is_401_with_a_challenge(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await client.post("/plans", headers=headers)

    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == CHALLENGE


async def test_a_bad_key_is_401_invalid_token_and_never_echoed(
    client: httpx.AsyncClient, keys: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    bad = keys["worker"][:-4] + "AAAA"

    with caplog.at_level(logging.DEBUG):
        response = await client.post("/plans", headers=bearer(bad))

    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == f'{CHALLENGE}, error="invalid_token"'
    assert bad not in response.text
    assert bad not in caplog.text
    assert "rejected an unknown API key" in caplog.text


async def test_a_key_without_the_scope_is_403(
    client: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    response = await client.get("/runs", headers=bearer(keys["worker"]))

    assert_problem(response, 403, "forbidden")
    assert "runs:read" in response.json()["detail"]
    assert keys["worker"] not in response.text


async def test_a_key_with_the_scope_passes_as_its_name(
    client: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    response = await client.post("/plans", headers={"Authorization": f"bearer  {keys['worker']}"})

    assert response.status_code == 200
    assert response.json() == {"name": "worker"}


async def test_implied_scopes_pass(client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    operator = await client.get("/runs", headers=bearer(keys["operator"]))
    admin = await client.get("/metrics", headers=bearer(keys["admin"]))

    assert operator.json() == {"all": True}
    assert admin.json() == {"cached": True}


async def test_any_valid_key_is_a_caller(client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    response = await client.get("/whoami", headers=bearer(keys["operator"]))

    assert response.json() == {"name": "operator"}


async def test_open_mode_passes_without_a_key() -> None:
    app = build_app(None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        metrics = await client.get("/metrics")
        whoami = await client.get("/whoami", headers=bearer("anything"))

    assert metrics.status_code == 200
    assert whoami.json() == {"name": None}


async def test_an_app_without_auth_installed_fails_closed() -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/whoami")
    async def whoami(caller: Caller) -> dict[str, object]:
        return {"name": caller.name}

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.get("/whoami")

    assert_problem(response, 500, "internal-error")


async def test_bad_keys_are_throttled_per_address_but_good_keys_pass(
    client: httpx.AsyncClient, keys: dict[str, str], clock: FakeClock
) -> None:
    bad = bearer("tl_0123456789ab_" + "x" * 43)

    first = [(await client.post("/plans", headers=bad)).status_code for _ in range(2)]
    throttled = await client.post("/plans", headers=bad)
    missing = await client.post("/plans")
    good = await client.post("/plans", headers=bearer(keys["worker"]))

    assert first == [401, 401]
    assert_problem(throttled, 429, "too-many-requests")
    assert throttled.headers["retry-after"] == "10"
    assert_problem(missing, 429, "too-many-requests")
    assert good.status_code == 200

    clock.now += 10
    assert (await client.post("/plans", headers=bad)).status_code == 401


async def test_another_address_is_not_throttled(keys_path: Path, clock: FakeClock) -> None:
    create_key(keys_path, "worker", [PLANS_EXECUTE])
    throttle = FailedAuthThrottle(burst=1, per_minute=1, clock=clock)
    app = build_app(load_keys(keys_path), throttle)
    bad = bearer("tl_0123456789ab_" + "x" * 43)
    statuses = []
    for host in ("10.0.0.1", "10.0.0.1", "10.0.0.2"):
        transport = httpx.ASGITransport(app=app, client=(host, 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            statuses.append((await client.post("/plans", headers=bad)).status_code)

    assert statuses == [401, 429, 401]


def test_require_scope_rejects_unknown_scopes() -> None:
    with pytest.raises(ValueError, match="unknown scope"):
        require_scope("plans:everything")


def test_install_auth_keeps_the_ring_and_a_default_throttle() -> None:
    app = FastAPI()
    ring = KeyRing([])

    install_auth(app, ring)

    assert app.state.keyring is ring
    assert isinstance(app.state.auth_throttle, FailedAuthThrottle)
