"""Fixtures registered for every test package (through `tests/conftest.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings
from tests.router import router_tools
from tests.support.app import AppFactory
from tests.support.chain_check import assert_chains_intact
from tests.support.fake_llm import FakeLLM, serve


@pytest.fixture
def fresh_router_tools() -> Iterator[None]:
    """The router test tools' counters and gates, reset before and after the test."""
    router_tools.reset()
    yield
    router_tools.reset()


@pytest.fixture
def model() -> FakeLLM:
    """A scripted fake model; request `model_url` too to reach it over a socket."""
    return FakeLLM()


@pytest.fixture
def model_url(model: FakeLLM) -> Iterator[str]:
    """The base URL of `model`, served on 127.0.0.1."""
    with serve(model) as url:
        yield url


@pytest.fixture
def make_app(database_url: str, tmp_path: Path) -> AppFactory:
    """Settings and running apps on this test's database, from a registry of the test's."""
    return AppFactory(database_url, tmp_path)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The app of the `settings` fixture, started (each package or file sets `settings`)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
async def chains_intact(database_url: str) -> AsyncIterator[None]:
    """After the test (its apps closed): every hash chain in its database recomputes
    from the rows as stored, and the checkpoints chain (`tests.support.chain_check`)."""
    yield
    await assert_chains_intact(database_url)
