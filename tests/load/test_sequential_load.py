"""Sequential load: concurrent clients submit plans to a real server for a bounded time.

Afterwards the database holds exactly one receipt per call answered (no loss,
no duplicate), every run ended `succeeded`, and no request got a 5xx. The
figures are printed (run with `-s`); TOOLLOOP_LOAD_SECONDS and
TOOLLOOP_LOAD_CLIENTS make a longer or wider run (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from tests.load.driver import (
    closed_loop,
    open_fds,
    peak_rss_mib,
    running_server,
    stored_counts,
)
from tests.load.registry import OWNER, write_registry

SECONDS = float(os.environ.get("TOOLLOOP_LOAD_SECONDS", "2"))
CLIENTS = int(os.environ.get("TOOLLOOP_LOAD_CLIENTS", "8"))
TOOLS = ("work", "sync_work", "work", "sync_work", "work")


def sequential_plan(number: int) -> dict[str, Any]:
    return {
        "owner": OWNER,
        "calls": [
            {"call_key": f"c{index}", "tool": tool, "args": {"n": number + index}}
            for index, tool in enumerate(TOOLS)
        ],
        "context": {"trace_id": f"load-{number}"},
    }


def test_every_answered_call_is_stored_exactly_once(tmp_path: Path, database_url: str) -> None:
    registry = write_registry(tmp_path)
    with running_server(tmp_path, registry, database_url) as server:
        result = asyncio.run(
            closed_loop(
                server.base, "/plans/sequential", sequential_plan, clients=CLIENTS, seconds=SECONDS
            )
        )
        pid = server.process.pid
        figures = {
            "database": database_url.split(":", 1)[0],
            "clients": CLIENTS,
            "seconds": SECONDS,
            **result.figures(),
            "server_peak_rss_mib": round(peak_rss_mib(pid), 1),
            "server_open_fds": open_fds(pid),
        }
    print("\nsequential load:", json.dumps(figures))
    stored = stored_counts(database_url)

    assert result.plans > 0
    assert not result.errors
    assert result.statuses == {200: result.plans}
    assert stored.runs_by_status == {"succeeded": result.plans}
    assert result.calls == result.plans * len(TOOLS)
    assert stored.receipts == result.calls
    assert stored.distinct_ids == stored.distinct_run_seq == stored.receipts
