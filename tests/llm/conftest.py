"""Fixtures: an LLMClient over the fake `model` behind MockTransport, recorded sleeps, and a
fake environment."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.llm.client import LLMClient
from tests.llm.fakes import SECRET, RecordingSleep
from tests.support.fake_llm import FakeLLM


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def http(model: FakeLLM) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(model)) as client:
        yield client


@pytest.fixture
def environ() -> dict[str, str]:
    return {"TEST_LLM_KEY": SECRET}


@pytest.fixture
def client(http: httpx.AsyncClient, sleep: RecordingSleep, environ: dict[str, str]) -> LLMClient:
    return LLMClient(
        http, max_attempts=3, backoff_s=1.0, backoff_max_s=4.0, sleep=sleep, environ=environ
    )
