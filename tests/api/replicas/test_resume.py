"""A run interrupted on one replica (it shut down) resumes on the other: only its calls
without a successful receipt run again."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.api.replicas.tools import call, calls, sequential
from tests.support.replicas import replicas
from tests.support.waiting import wait_for_sync

pytestmark = pytest.mark.postgres


def test_a_run_interrupted_on_one_replica_resumes_on_the_other(
    tmp_path: Path, env: dict[str, str]
) -> None:
    plan = sequential(call("first"), call("held", "gated"), call("after"))
    with replicas(tmp_path, 2, env) as (a, b):
        started = httpx.post(
            f"{a.base}/plans/sequential", json=plan, headers={"Prefer": "respond-async"}
        )
        run_id = started.json()["run_id"]
        wait_for_sync(lambda: (tmp_path / "held.started").exists(), "the gated call started")
        while_running = httpx.post(f"{b.base}/runs/{run_id}/resume", json=plan, timeout=30)
        a.stop()
        interrupted = httpx.get(f"{b.base}/runs/{run_id}").json()
        (tmp_path / "held").touch()
        resumed = httpx.post(f"{b.base}/runs/{run_id}/resume", json=plan, timeout=30)
        stored = httpx.get(f"{b.base}/runs/{run_id}/receipts").json()["items"]

    assert while_running.status_code == 409
    assert interrupted["status"] == "interrupted"
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "succeeded"
    assert [(r["call_key"], r["status"]) for r in stored] == [
        ("first", "succeeded"),
        ("held", "succeeded"),
        ("after", "succeeded"),
    ]
    assert calls(tmp_path) == ["first", "held", "held", "after"]
