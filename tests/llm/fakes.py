"""A scripted model server for httpx.MockTransport, a sleep that only records, and builders."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.llm.profiles import ModelProfile

SECRET = "sk-test-0123456789abcdef"

Step = httpx.Response | Exception | Callable[[httpx.Request], Awaitable[httpx.Response]]


@dataclass
class ScriptedServer:
    steps: list[Step] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):
            return step
        return await step(request)

    def reply(self, status: int = 200, **kwargs: Any) -> None:
        self.steps.append(httpx.Response(status, **kwargs))


@dataclass
class RecordingSleep:
    delays: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def openai_profile(**overrides: Any) -> ModelProfile:
    values: dict[str, Any] = {
        "name": "router-small",
        "provider": "openai",
        "base_url": "http://llm.test/v1",
        "model": "test-model",
        "api_key_env": "TEST_LLM_KEY",
        "temperature": 0.0,
        "max_tokens": 256,
        "timeout_s": 5.0,
    }
    return ModelProfile(**(values | overrides))


def anthropic_profile(**overrides: Any) -> ModelProfile:
    values: dict[str, Any] = {
        "name": "final-large",
        "provider": "anthropic",
        "base_url": "https://anthropic.test",
        "model": "claude-test",
        "api_key_env": "TEST_LLM_KEY",
        "timeout_s": 5.0,
    }
    return ModelProfile(**(values | overrides))


def openai_body(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    } | extra
