"""A sleep that only records, and model profiles for the client's tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.llm.profiles import ModelProfile

SECRET = "sk-test-0123456789abcdef"


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
