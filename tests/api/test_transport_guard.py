"""Bodies must be JSON; in open mode the Host must be loopback; CORS only for listed origins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.api.app import create_app
from app.api.auth import PLANS_EXECUTE, create_key
from app.api.transport_guard import is_json_media_type, is_loopback_authority
from app.settings import Settings
from tests.api.conftest import EXAMPLE_REGISTRY

PLAN = {
    "owner": "text-worker",
    "calls": [{"call_key": "1", "tool": "word_count", "args": {"text": "a b"}}],
}
PLAN_BYTES = orjson.dumps(PLAN)
ORIGIN = "https://console.example"


@asynccontextmanager
async def serving(
    settings: Settings, base_url: str = "http://127.0.0.1:8000"
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
            yield client


@pytest.fixture
def open_settings(sqlite_url: str) -> Settings:
    return Settings(registries=[EXAMPLE_REGISTRY], database_url=sqlite_url)


@pytest.fixture
async def client(open_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(open_settings) as client:
        yield client


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert set(body) >= {"type", "title", "status", "detail"}
    return body


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin-1",
        "application/jsonx",
        "application/merge-patch+json",
    ],
)
async def test_a_body_that_is_not_json_is_415(client: httpx.AsyncClient, content_type: str) -> None:
    response = await client.post(
        "/plans/sequential", content=PLAN_BYTES, headers={"content-type": content_type}
    )
    body = assert_problem(response, 415)
    assert "application/json" in body["detail"]
    assert (await client.get("/runs")).json()["items"] == []


async def test_a_body_without_a_content_type_is_415(client: httpx.AsyncClient) -> None:
    response = await client.post("/plans/sequential", content=PLAN_BYTES)
    assert_problem(response, 415)


async def test_an_empty_form_post_is_415_too(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/runs/some-run/cancel", headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert_problem(response, 415)


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "Application/JSON", "application/json; charset=utf-8",
     'application/json;charset="UTF-8"'],
)  # fmt: skip
async def test_json_bodies_pass(client: httpx.AsyncClient, content_type: str) -> None:
    response = await client.post(
        "/plans/sequential", content=PLAN_BYTES, headers={"content-type": content_type}
    )
    assert response.status_code == 200, response.text


async def test_a_post_without_a_body_needs_no_content_type(client: httpx.AsyncClient) -> None:
    response = await client.post("/runs/no-such-run/cancel")
    assert_problem(response, 404)


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:1", "127.9.8.7:65535", "[::1]",
     "[::1]:8000", "LOCALHOST:8000"],
)  # fmt: skip
async def test_open_mode_answers_loopback_hosts(client: httpx.AsyncClient, host: str) -> None:
    response = await client.get("/tools", headers={"host": host})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "host",
    ["attacker.example", "attacker.example:8000", "127.0.0.1.attacker.example", "0.0.0.0:8000",
     "192.168.1.10", "[::2]:8000", "localhost.attacker.example", "sub.localhost", "::1",
     "127.0.0.1:80x", "localhost:", ""],
)  # fmt: skip
async def test_open_mode_refuses_other_hosts_with_421(client: httpx.AsyncClient, host: str) -> None:
    response = await client.post("/plans/sequential", json=PLAN, headers={"host": host})
    body = assert_problem(response, 421)
    assert "loopback" in body["detail"]
    assert (await client.get("/runs")).json()["items"] == []


async def test_with_keys_any_host_is_served(sqlite_url: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys.yml"
    key = create_key(keys, "worker", [PLANS_EXECUTE])
    settings = Settings(registries=[EXAMPLE_REGISTRY], database_url=sqlite_url, api_keys=keys)
    async with serving(settings, base_url="http://toolloop.internal:8000") as client:
        response = await client.post(
            "/plans/sequential", json=PLAN, headers={"Authorization": f"Bearer {key}"}
        )
        not_json = await client.post(
            "/plans/sequential",
            content=PLAN_BYTES,
            headers={"Authorization": f"Bearer {key}", "content-type": "text/plain"},
        )
    assert response.status_code == 200, response.text
    assert_problem(not_json, 415)


def preflight(path: str = "/plans/sequential") -> dict[str, str]:
    return {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }


async def test_without_listed_origins_no_cors_is_granted(client: httpx.AsyncClient) -> None:
    answered = await client.options("/plans/sequential", headers=preflight())
    simple = await client.get("/tools", headers={"Origin": ORIGIN})
    for response in (answered, simple):
        assert not [name for name in response.headers if name.startswith("access-control-")]
    assert answered.status_code != 200


async def test_listed_origins_and_only_they_get_cors(open_settings: Settings) -> None:
    settings = open_settings.model_copy(update={"cors_origins": [ORIGIN]})
    async with serving(settings) as client:
        allowed = await client.options("/plans/sequential", headers=preflight())
        other = await client.options(
            "/plans/sequential", headers={**preflight(), "Origin": "https://evil.example"}
        )
        simple = await client.get("/tools", headers={"Origin": ORIGIN})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "access-control-allow-origin" not in other.headers
    assert simple.headers["access-control-allow-origin"] == ORIGIN
    assert "x-request-id" in simple.headers["access-control-expose-headers"].lower()


def test_the_cors_origins_setting_is_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLLOOP_CORS_ORIGINS", f"{ORIGIN}, http://localhost:3000")
    assert Settings().cors_origins == [ORIGIN, "http://localhost:3000"]


def test_host_and_media_type_parsing() -> None:
    assert is_loopback_authority(b"[::ffff:127.0.0.1]:80")
    assert not is_loopback_authority(b"[127.0.0.1]")
    assert not is_loopback_authority(b"127.0.0.1:\xd9\xa1")  # non-ASCII digits
    assert is_json_media_type(b"application/json")
    assert not is_json_media_type(b"application/json; boundary=x")


async def test_the_consoles_forms_are_not_held_to_json_bodies(client: httpx.AsyncClient) -> None:
    form = await client.post(
        "/console/sign-out",
        content=b"csrf_token=x",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    api = await client.post(
        "/plans/sequential",
        content=b"owner=x",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 303
    assert api.status_code == 415
