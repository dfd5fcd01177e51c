"""An in-process service with the console's registry, open or with API keys."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.app import create_app
from app.api.auth.keys_file import create_key
from app.settings import Settings
from tests.api.console import console_tools
from tests.api.console.console_registry import write_registry

BASE = "http://127.0.0.1"
AppFactory = Callable[..., Any]


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    console_tools.reset()
    yield
    console_tools.reset()


@pytest.fixture
def make_app(tmp_path: Path, database_url: str) -> AppFactory:
    @asynccontextmanager
    async def make(api_keys: Path | None = None) -> AsyncIterator[FastAPI]:
        settings = Settings(
            registries=[write_registry(tmp_path)], database_url=database_url, api_keys=api_keys
        )
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            yield app

    return make


@asynccontextmanager
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client that keeps cookies, as a browser would, on a loopback origin."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


@pytest.fixture
async def open_console(make_app: AppFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_app() as app, browser(app) as client:
        yield client


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "keys.yml"
    return path, {
        "worker": create_key(path, "worker", ["plans:execute", "runs:read"]),
        "other": create_key(path, "other", ["plans:execute", "runs:read"]),
        "metrics": create_key(path, "metrics", ["metrics:read"]),
        "ops": create_key(path, "ops", ["runs:read:all"]),
    }
