"""Fixtures registered for every test package (through `tests/conftest.py`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.router import router_tools
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
