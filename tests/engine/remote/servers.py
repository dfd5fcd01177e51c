"""MCP test servers in subprocesses on 127.0.0.1, and registries pinning their tools."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from mcp import Client

from tests.live_server import REPO, free_port
from tests.support.waiting import wait_for_sync

# What the v1 server lists, as `toolloop registry import-mcp` pins it.
ECHO_PIN: dict[str, Any] = {
    "description": "Echo the text back.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
        "title": "echoArguments",
    },
    "output_schema": {"additionalProperties": True, "title": "echoDictOutput", "type": "object"},
}
HANG_PIN: dict[str, Any] = {
    "description": "Never answers.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
        "title": "hangArguments",
    },
    "output_schema": {"additionalProperties": True, "title": "hangDictOutput", "type": "object"},
}
BOOM_PIN: dict[str, Any] = {
    "description": "Fails.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
        "title": "boomArguments",
    },
    "output_schema": {"additionalProperties": True, "title": "boomDictOutput", "type": "object"},
}
PAUSE_PIN: dict[str, Any] = {
    "description": "Wait a moment, then answer.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
        "title": "pauseArguments",
    },
    "output_schema": {"additionalProperties": True, "title": "pauseDictOutput", "type": "object"},
}
GREET_PIN: dict[str, Any] = {
    "description": "Greet in text.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
        "title": "greetArguments",
    },
    "output_schema": {},
}
CHANGE_ECHO_PIN: dict[str, Any] = {
    "description": "Replace echo by another one.",
    "input_schema": {"properties": {}, "type": "object", "title": "change_echoArguments"},
    "output_schema": {
        "additionalProperties": True,
        "title": "change_echoDictOutput",
        "type": "object",
    },
}


@dataclass
class McpTestServer:
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, variant: str, token: str | None = None) -> None:
        assert self.process is None
        args = [
            sys.executable,
            "-m",
            "tests.engine.remote.mcp_test_server",
            str(self.port),
            variant,
        ]
        self.process = subprocess.Popen(
            [*args, *([token] if token else [])],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        process = self.process

        def listening() -> bool:
            if process.poll() is not None:
                raise RuntimeError("the MCP test server exited")
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for_sync(listening, "the MCP test server listens", every_s=0.02)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


@contextmanager
def mcp_server(variant: str = "v1", token: str | None = None) -> Iterator[McpTestServer]:
    server = McpTestServer(free_port())
    server.start(variant, token)
    try:
        yield server
    finally:
        server.stop()


def remote_registry(
    path: Path,
    url: str,
    *,
    token_env: str | None = None,
    timeout_s: float = 30.0,
    hang_timeout_s: float = 0.5,
) -> Path:
    """A registry of owner `remote` pinning the v1 server's tools (all but echo_calls)."""
    endpoint: dict[str, Any] = {"url": url}
    if token_env is not None:
        endpoint["token_env"] = token_env
    tools = {
        "echo": {"mcp": {**endpoint, "tool": "echo"}, **ECHO_PIN, "effect": "read"},
        "hang": {"mcp": {**endpoint, "tool": "hang"}, **HANG_PIN, "timeout_s": hang_timeout_s},
        "boom": {"mcp": {**endpoint, "tool": "boom"}, **BOOM_PIN},
        "change_echo": {"mcp": {**endpoint, "tool": "change_echo"}, **CHANGE_ECHO_PIN},
        "pause": {"mcp": {**endpoint, "tool": "pause"}, **PAUSE_PIN},
        "greet": {"mcp": {**endpoint, "tool": "greet"}, **GREET_PIN},
    }
    registry = {
        "subagents": {
            "remote": {
                "tools": tools,
                "runner_defaults": {
                    "allowed_tools": sorted(tools),
                    "max_calls": 8,
                    "tool_timeout_s": timeout_s,
                },
            }
        }
    }
    path.write_text(yaml.safe_dump(registry, sort_keys=False))
    return path


async def server_counts(url: str) -> dict[str, int]:
    """How many times the server ran `echo` and opened a session (this one included),
    asked directly over MCP."""
    async with Client(url, cache=None, mode="legacy") as client:
        result = await client.call_tool("echo_calls", {})
    assert result.structured_content is not None
    counts: dict[str, int] = result.structured_content
    return counts


async def echo_calls(url: str) -> int:
    return (await server_counts(url))["echo"]
