"""SIGTERM with event streams open: a real `toolloop serve` ends within its grace.

The open stream gets a final `end` event (`interrupted`) and closes, the
process exits, and the run reads `interrupted` after a restart on the same
database. The bound on the exit is a correctness bound (the stream used to hold
the shutdown for the whole run), kept generous.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.shutdown_tools import STARTED_DIR_ENV, write_registry
from tests.live_server import ServerProcess
from tests.support.waiting import wait_for_sync

REPO = Path(__file__).resolve().parents[2]
GRACE_S = "2"
EXIT_BOUND_S = 30
# Much longer than any bound here: only a shutdown ends these calls.
TOOL_SLEEP_S = 600.0


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return write_registry(tmp_path)


def _server(tmp_path: Path, registry: Path, database_url: str, log_name: str) -> ServerProcess:
    env = {
        "TOOLLOOP_REGISTRIES": str(registry),
        "TOOLLOOP_DATABASE_URL": database_url,
        "TOOLLOOP_SHUTDOWN_GRACE_S": GRACE_S,
        # No heartbeats: a stream left open fails the read's timeout instead of hanging.
        "TOOLLOOP_RUN_EVENTS_HEARTBEAT_S": "3600",
        "PYTHONPATH": str(REPO),
        STARTED_DIR_ENV: str(tmp_path),
    }
    server = ServerProcess(tmp_path, [], env, log_name=log_name)
    server.wait_until_answering()
    return server


def _events(lines: list[str]) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    kind = ""
    for line in lines:
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((kind, json.loads(line.removeprefix("data: "))))
    return events


@pytest.mark.parametrize("tool", ["slow", "slow_sync"])
def test_sigterm_ends_open_streams_and_the_process_within_the_grace(
    tmp_path: Path, registry: Path, database_url: str, tool: str
) -> None:
    server = _server(tmp_path, registry, database_url, "first.log")
    restarted: ServerProcess | None = None
    try:
        body = {
            "owner": "sleeper",
            "calls": [
                {"call_key": "1", "tool": tool, "args": {"label": "a", "seconds": TOOL_SLEEP_S}}
            ],
        }
        started = httpx.post(
            f"{server.base}/plans/sequential",
            json=body,
            headers={"Prefer": "respond-async"},
            timeout=30,
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        wait_for_sync((tmp_path / "a.started").exists)

        lines: list[str] = []
        with (
            httpx.Client(base_url=server.base, timeout=EXIT_BOUND_S) as client,
            client.stream("GET", f"/runs/{run_id}/events") as stream,
        ):
            assert stream.status_code == 200
            server.process.terminate()
            lines.extend(stream.iter_lines())  # ends only when the server closes the stream
        server.process.wait(timeout=EXIT_BOUND_S)

        events = _events(lines)
        assert events[-1] == ("end", {"run_id": run_id, "status": "interrupted"}), server.log()
        receipts = [data for kind, data in events if kind == "receipt"]
        assert [r["status"] for r in receipts] == ["failed"]
        assert receipts[0]["error"]["kind"] == "cancelled"

        restarted = _server(tmp_path, registry, database_url, "second.log")
        run = httpx.get(f"{restarted.base}/runs/{run_id}", timeout=30).json()
        assert run["status"] == "interrupted"
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()
