"""An in-process service with the console's registry, open or with API keys."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from app.api.auth.keys_file import create_key
from tests.api.console import console_tools
from tests.api.console.console_registry import REGISTRY
from tests.support.app import AppFactory


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    console_tools.reset()
    yield
    console_tools.reset()


@pytest.fixture
async def open_console(make_app: AppFactory) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the console with no API keys; it keeps cookies, as a browser would."""
    async with make_app(REGISTRY) as (_, client):
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
