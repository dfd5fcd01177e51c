"""With API keys, the OpenAPI document and the documentation pages need a valid key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.api.app import create_app
from app.api.auth import RUNS_READ, create_key, install_auth, load_keys

DOCUMENTATION = ["/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"]


@pytest.fixture
def keys_path(tmp_path: Path) -> Path:
    return tmp_path / "keys.yml"


@pytest.fixture
def key(keys_path: Path) -> str:
    return create_key(keys_path, "reader", [RUNS_READ])


@pytest.fixture
async def client(key: str, keys_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app()
    install_auth(app, load_keys(keys_path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


@pytest.mark.parametrize("path", DOCUMENTATION)
async def test_without_a_key_the_documentation_is_401(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert "/plans/sequential" not in response.text
    bad = await client.get(path, headers={"Authorization": "Bearer tl_000000000000_" + "A" * 43})
    assert bad.status_code == 401


@pytest.mark.parametrize("path", DOCUMENTATION)
async def test_any_valid_key_reads_the_documentation(
    client: httpx.AsyncClient, key: str, path: str
) -> None:
    response = await client.get(path, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    if path == "/openapi.json":
        assert "/plans/sequential" in response.json()["paths"]
    else:
        assert response.headers["content-type"].startswith("text/html")
