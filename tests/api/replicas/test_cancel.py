"""`POST /runs/{id}/cancel` sent to the replica that does not execute the run.

The replica executing it stops it as a local cancel does and the answer is the
same; a replica killed with SIGKILL cannot answer, so once its heartbeat is
stale the cancel marks its run `interrupted` and says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.api.replicas.tools import call, sequential
from tests.live_server import ServerProcess
from tests.support.replicas import replicas
from tests.support.waiting import wait_for_sync

pytestmark = pytest.mark.postgres
ASYNC = {"Prefer": "respond-async"}


@contextmanager
def _started(workdir: Path, env: dict[str, str]) -> Iterator[ServerProcess]:
    """One more replica, with settings of its own."""
    server = ServerProcess(workdir, [], env, log_name="replica-b.log")
    try:
        server.wait_until_answering()
        yield server
    finally:
        server.stop()


def test_a_cancel_on_the_other_replica_stops_the_run_as_a_local_cancel_does(
    tmp_path: Path, env: dict[str, str]
) -> None:
    plan = sequential(call("first"), call("held", "gated"), call("after"))
    with replicas(tmp_path, 2, env) as (a, b):
        started = httpx.post(f"{a.base}/plans/sequential", json=plan, headers=ASYNC)
        run_id = started.json()["run_id"]
        wait_for_sync(lambda: (tmp_path / "held.started").exists(), "the gated call started")

        cancelled = httpx.post(f"{b.base}/runs/{run_id}/cancel", timeout=30)
        again = httpx.post(f"{b.base}/runs/{run_id}/cancel", timeout=30)
        run = httpx.get(f"{b.base}/runs/{run_id}").json()
        receipts = httpx.get(f"{a.base}/runs/{run_id}/receipts").json()["items"]

    assert started.status_code == 202, started.text
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {"run_id": run_id, "status": "cancelled"}
    assert again.status_code == 409
    assert again.json()["detail"] == "The run already ended: cancelled."
    assert run["status"] == "cancelled"
    assert [(r["call_key"], r["status"]) for r in receipts] == [
        ("first", "succeeded"),
        ("held", "failed"),
        ("after", "skipped"),
    ]
    assert receipts[1]["error"]["kind"] == "cancelled"


def test_a_cancel_of_a_run_whose_replica_died_marks_it_interrupted(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # `a` beats often and goes stale soon; `b` sweeps never on its own in this test, so
    # only the cancel finds `a` dead, and answers at once while `a` may still look alive.
    env_a = {**env, "TOOLLOOP_HEARTBEAT_INTERVAL_S": "0.2", "TOOLLOOP_INSTANCE_STALE_AFTER_S": "2"}
    env_b = {
        **env,
        "TOOLLOOP_HEARTBEAT_INTERVAL_S": "600",
        "TOOLLOOP_INSTANCE_STALE_AFTER_S": "2",
        "TOOLLOOP_RUN_CANCEL_WAIT_S": "0.5",
    }
    plan = sequential(call("first"), call("held", "gated"))
    with replicas(tmp_path, 1, env_a) as [a], _started(tmp_path, env_b) as b:
        run_id = httpx.post(f"{a.base}/plans/sequential", json=plan, headers=ASYNC).json()["run_id"]
        wait_for_sync(lambda: (tmp_path / "held.started").exists(), "the gated call started")
        a.kill()

        def answered() -> httpx.Response | None:
            response = httpx.post(f"{b.base}/runs/{run_id}/cancel", timeout=30)
            # 503 (unconfirmed) while `a` still looks alive: nobody answers the cancel.
            return None if response.status_code == 503 else response

        cancelled = wait_for_sync(answered, "the cancel was answered")
        run = httpx.get(f"{b.base}/runs/{run_id}").json()
        stored = httpx.get(f"{b.base}/runs/{run_id}/receipts").json()["items"]

    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {"run_id": run_id, "status": "interrupted"}
    # The sweep's count: the receipts stored before the kill.
    assert (run["status"], run["call_count"]) == ("interrupted", len(stored))
