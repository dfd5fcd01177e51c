"""Two separate `toolloop serve` processes on one PostgreSQL database, as two hosts
would run them: a run started through one is read through the other, and when
one is killed with -9 the other ends its runs `interrupted`."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.faults.fault_tools import GATE_DIR_ENV
from tests.faults.registry import gate, sequential, write_registry
from tests.support.replicas import instance_pids, replicas, run_instance_pid, serve_env
from tests.support.waiting import wait_for_sync

ASYNC = {"Prefer": "respond-async"}


def _status(base: str, run_id: str) -> str:
    response = httpx.get(f"{base}/runs/{run_id}", timeout=30)
    assert response.status_code == 200, response.text
    status: str = response.json()["status"]
    return status


def _start_gated(base: str, gate_name: str) -> str:
    response = httpx.post(
        f"{base}/plans/sequential",
        json=sequential(gate("g", gate_name)),
        headers=ASYNC,
        timeout=30,
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


@pytest.mark.postgres
def test_a_run_is_read_through_either_process_and_ends_interrupted_when_its_own_dies(
    tmp_path: Path, postgres_url: str
) -> None:
    registry = write_registry(tmp_path / "registry")
    env = {
        **serve_env(postgres_url, [registry], heartbeat_interval_s="1", instance_stale_after_s="3"),
        GATE_DIR_ENV: str(tmp_path),
    }
    with replicas(tmp_path, 2, env) as (first, second):
        pids = {first.process.pid, second.process.pid}
        wait_for_sync(lambda: instance_pids(postgres_url) == pids, "both registered")

        finishing = _start_gated(first.base, "open")
        assert run_instance_pid(postgres_url, finishing) == first.process.pid
        assert _status(second.base, finishing) == "running"
        (tmp_path / "open").touch()
        wait_for_sync(lambda: _status(second.base, finishing) == "succeeded")
        listed = httpx.get(f"{second.base}/runs", timeout=30).json()["items"]
        assert [run["run_id"] for run in listed] == [finishing]

        orphaned = _start_gated(first.base, "never")
        wait_for_sync(lambda: _status(second.base, orphaned) == "running")
        first.kill()

        # Nothing replaces it: the survivor's sweep finds its heartbeat stale.
        wait_for_sync(lambda: _status(second.base, orphaned) == "interrupted")
