"""An in-process service on a real database, reached through httpx.ASGITransport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "registries" / "example.yml"


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(registries=[EXAMPLE_REGISTRY], database_url=database_url)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client
