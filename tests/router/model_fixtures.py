"""Fixtures for tests that run the router against the scripted model server
(registered for every package in `tests/conftest.py`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.router import router_tools
from tests.router.scripted_server import ScriptedServer, scripted_server


@pytest.fixture
def fresh_router_tools() -> Iterator[None]:
    """The router test tools' counters and gates, reset before and after the test."""
    router_tools.reset()
    yield
    router_tools.reset()


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    """A scripted OpenAI-compatible model server on 127.0.0.1."""
    with scripted_server() as server:
        yield server
