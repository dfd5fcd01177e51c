"""The model in tests: a plain function replaying a script, in the providers' wire formats.

`FakeLLM` is an httpx handler: put it behind `httpx.MockTransport` to test a client
in-process, or serve it on 127.0.0.1 with `serve()` where the app under test must reach
the model over a real socket. It answers OpenAI-compatible chat completions
(`{base}/v1/chat/completions`) and the Anthropic messages API (`{base}/v1/messages`)
alike: in script order, whatever the path, recording every request.

A step of the script is a JSON body (answered with 200), raw bytes (200, not JSON), an
`httpx.Response`, an exception to raise (in-process only: a served fake answers 500), or
an async function of the request returning one of those.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Reply = Mapping[str, Any] | list[Any] | bytes | httpx.Response | Exception
Step = Reply | Callable[[httpx.Request], Awaitable[Reply]]
Call = tuple[str, str, Any]  # (id, name, arguments: a JSON-able value, or raw text if str)


class FakeLLM:
    def __init__(self, *steps: Step) -> None:
        self._steps: deque[Step] = deque(steps)
        self._lock = threading.Lock()
        self.requests: list[httpx.Request] = []
        self.exhausted = False

    def script(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def reply(
        self,
        body: Any = None,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        **response: Any,
    ) -> None:
        """One scripted answer: `body` as JSON (bytes as they are), or httpx.Response's
        own keywords (`text=`, `stream=`)."""
        if isinstance(body, bytes):
            response["content"] = body
        elif body is not None:
            response["json"] = body
        self.script(httpx.Response(status, headers=headers, **response))

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._steps)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.requests.append(request)
            if not self._steps:
                self.exhausted = True
                raise AssertionError("the model script is exhausted")
            step = self._steps.popleft()
        reply = await step(request) if callable(step) else step
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, httpx.Response):
            return reply
        if isinstance(reply, bytes):
            return httpx.Response(200, content=reply)
        return httpx.Response(200, json=reply)

    def body(self, index: int) -> Any:
        """The JSON body of the `index`-th request."""
        return json.loads(self.requests[index].content)

    def tool_results(self, index: int) -> dict[str, str]:
        """The tool results (call id -> content) the `index`-th request carried (OpenAI format)."""
        return {
            m["tool_call_id"]: m["content"]
            for m in self.body(index)["messages"]
            if m["role"] == "tool"
        }

    def tool_names(self, index: int) -> list[str]:
        return [t["function"]["name"] for t in self.body(index).get("tools", [])]


@contextmanager
def serve(fake: FakeLLM) -> Iterator[str]:
    """Serve `fake` on 127.0.0.1 from a thread; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def _answer(fake: FakeLLM, request: httpx.Request) -> tuple[int, httpx.Headers, bytes]:
    try:
        response = await fake(request)
    except Exception as error:
        return 500, httpx.Headers(), json.dumps({"error": str(error)}).encode()
    return response.status_code, response.headers, await response.aread()


def _handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            host, port = self.server.server_address[:2]
            request = httpx.Request(
                "POST",
                f"http://{host!s}:{port}{self.path}",
                headers=list(self.headers.items()),
                content=self.rfile.read(length),
            )
            status, headers, body = asyncio.run(_answer(fake, request))
            self.send_response(status)
            for key, value in headers.items():
                if key not in ("content-length", "content-type", "content-encoding"):
                    self.send_header(key, value)
            self.send_header("content-type", headers.get("content-type", "application/json"))
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def profiles_yaml(base_url: str) -> str:
    """Profiles pointing at a served fake: an OpenAI-compatible router and final, and an
    Anthropic final."""
    return f"""\
profiles:
  router-small:
    provider: openai
    base_url: {base_url}/v1
    model: scripted-router
    temperature: 0
    timeout_s: 10
  final-local:
    provider: openai
    base_url: {base_url}/v1
    model: scripted-final
    timeout_s: 10
  final-large:
    provider: anthropic
    base_url: {base_url}
    model: scripted-claude
    api_key_env: TOOLLOOP_TEST_ANTHROPIC_KEY
    timeout_s: 10
"""


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _openai_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def openai_body(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A chat completion carrying `message` as it is."""
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": _openai_usage(11, 7),
    } | extra


def openai_text(
    text: str, *, prompt_tokens: int = 10, completion_tokens: int = 5
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": _openai_usage(prompt_tokens, completion_tokens),
    }


def openai_calls(
    *calls: Call, text: str | None = None, prompt_tokens: int = 10, completion_tokens: int = 5
) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": _arguments(arguments)},
            }
            for call_id, name, arguments in calls
        ],
    }
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": _openai_usage(prompt_tokens, completion_tokens),
    }


def anthropic_text(text: str, *, input_tokens: int = 12, output_tokens: int = 6) -> dict[str, Any]:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def anthropic_calls(*calls: Call, text: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        for call_id, name, arguments in calls
    ]
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 12, "output_tokens": 6},
    }
