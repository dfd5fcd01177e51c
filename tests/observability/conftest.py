"""An in-process service on the observability test registry, with and without API keys."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from app.api.app import create_app
from app.api.auth import create_key
from app.observability.logging import build_handler
from app.settings import Settings
from tests.observability.registry import write_registry

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "registries" / "example.yml"


@pytest.fixture
def registry_path(tmp_path: Path) -> Path:
    return write_registry(tmp_path)


@pytest.fixture
def settings(registry_path: Path, sqlite_url: str) -> Settings:
    return Settings(registries=[registry_path], database_url=sqlite_url)


@pytest.fixture
def keys_path(tmp_path: Path) -> Path:
    return tmp_path / "keys.json"


def bearer(keys_path: Path, name: str, *scopes: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_key(keys_path, name, scopes)}"}


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """Everything logged while the test runs, through the service's own JSON handler."""
    stream = io.StringIO()
    handler = build_handler("json", stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """Start an app for `settings` (keys must exist before it starts) and a client for it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client
