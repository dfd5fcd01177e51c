"""The model as a plain function behind httpx.MockTransport, replaying a script."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

Step = dict[str, Any] | httpx.Response | Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass
class FakeModel:
    steps: list[Step] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    headers: list[httpx.Headers] = field(default_factory=list)

    def script(self, *steps: Step) -> None:
        self.steps.extend(steps)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.urls.append(str(request.url))
        self.headers.append(request.headers)
        if not self.steps:
            raise AssertionError("the model script is exhausted")
        step = self.steps.pop(0)
        if callable(step):
            step = await step(body)
        if isinstance(step, httpx.Response):
            return step
        return httpx.Response(200, json=step)

    def tool_results(self, index: int) -> dict[str, str]:
        """The tool results (call id -> content) the `index`-th request carried (OpenAI format)."""
        return {
            m["tool_call_id"]: m["content"]
            for m in self.requests[index]["messages"]
            if m["role"] == "tool"
        }

    def tool_names(self, index: int) -> list[str]:
        return [t["function"]["name"] for t in self.requests[index].get("tools", [])]
