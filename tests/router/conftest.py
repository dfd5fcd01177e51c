from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.engine.engine import Engine
from app.engine.memory import MemoryAuditSink, MemoryReceiptSink
from app.llm.client import LLMClient
from tests.router.harness import ANTHROPIC_KEY, RouterHarness, load_test_prompts
from tests.router.registry import load_registry
from tests.support.fake_llm import FakeLLM


@pytest.fixture(autouse=True)
def _fresh_tools(fresh_router_tools: None) -> None:
    """Every test here starts with fresh router test tools."""


@pytest.fixture
async def harness(tmp_path: Path, model: FakeLLM) -> AsyncIterator[RouterHarness]:
    contract = load_registry(tmp_path)
    receipts, audit = MemoryReceiptSink(), MemoryAuditSink()
    engine = Engine(contract, receipts=receipts, audit=audit, worker_threads=4)
    sleeps: list[float] = []
    environ = {"TEST_ANTHROPIC_KEY": ANTHROPIC_KEY}

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async with httpx.AsyncClient(transport=httpx.MockTransport(model)) as http:
        llm = LLMClient(
            http,
            max_attempts=3,
            backoff_s=1.0,
            backoff_max_s=4.0,
            sleep=sleep,
            environ=environ,
        )
        yield RouterHarness(
            contract=contract,
            engine=engine,
            receipts=receipts,
            audit=audit,
            model=model,
            http=http,
            llm=llm,
            prompts=load_test_prompts(),
            sleeps=sleeps,
            environ=environ,
        )
    await engine.aclose()
