"""Fixtures: an LLMClient over a scripted server, with recorded sleeps and a fake environment."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.llm.client import LLMClient
from tests.llm.fakes import SECRET, RecordingSleep, ScriptedServer


@pytest.fixture
def server() -> ScriptedServer:
    return ScriptedServer()


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def http(server: ScriptedServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        yield client


@pytest.fixture
def environ() -> dict[str, str]:
    return {"TEST_LLM_KEY": SECRET}


@pytest.fixture
def client(http: httpx.AsyncClient, sleep: RecordingSleep, environ: dict[str, str]) -> LLMClient:
    return LLMClient(
        http, max_attempts=3, backoff_s=1.0, backoff_max_s=4.0, sleep=sleep, environ=environ
    )
