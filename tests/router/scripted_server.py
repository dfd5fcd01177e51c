"""A scripted model server on 127.0.0.1: a real HTTP server replaying scripted replies.

It answers both OpenAI-compatible chat completions (`{base}/v1/chat/completions`)
and the Anthropic messages API (`{base}/v1/messages`), in script order, and
records every request. Use it through a profile whose `base_url` points here.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: Mapping[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str]


class ScriptedServer:
    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.exhausted = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def reply(
        self, body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        with self._lock:
            self._replies.append(Reply(status, raw, dict(headers or {})))

    def script(self, *bodies: Any) -> None:
        for body in bodies:
            self.reply(body)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self._replies:
                return self._replies.popleft()
            self.exhausted = True
            return Reply(500, b'{"error": "the script is exhausted"}', {})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                headers = {key.lower(): value for key, value in self.headers.items()}
                reply = server._next(Recorded(self.path, headers, json.loads(raw or b"{}")))
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def scripted_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


def profiles_yaml(base_url: str) -> str:
    """Profiles pointing at the scripted server: an OpenAI-compatible router and
    finals, and an Anthropic final."""
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
