"""`GET /runs/{id}/events` on the replica that does not execute the run.

The executing replica relays the run's receipts as they become durable and its
end; the stream sends the same events as one opened where the run executes,
a late client first gets what already happened. Polling is turned off (both
intervals 600 s), so only the relay can bring the events in time.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.api.replicas.tools import call, sequential
from tests.support.event_stream import Stream
from tests.support.replicas import replicas
from tests.support.waiting import wait_for_sync

pytestmark = pytest.mark.postgres
ASYNC = {"Prefer": "respond-async"}
NO_POLLING = {"TOOLLOOP_RUN_EVENTS_POLL_S": "600", "TOOLLOOP_RUN_EVENTS_HEARTBEAT_S": "600"}


def test_a_stream_on_the_other_replica_gets_each_receipt_once_then_the_end(
    tmp_path: Path, env: dict[str, str]
) -> None:
    plan = sequential(call("first"), call("held", "gated"), call("after"))
    with replicas(tmp_path, 2, {**env, **NO_POLLING}) as (a, b):
        run_id = httpx.post(f"{a.base}/plans/sequential", json=plan, headers=ASYNC).json()["run_id"]
        wait_for_sync(lambda: (tmp_path / "held.started").exists(), "the gated call started")
        wait_for_sync(
            lambda: httpx.get(f"{a.base}/runs/{run_id}/receipts").json()["items"],
            "the first receipt is stored",
        )
        elsewhere = Stream(f"{b.base}/runs/{run_id}/events")
        here = Stream(f"{a.base}/runs/{run_id}/events")
        for stream in (elsewhere, here):
            assert stream.opened.wait(60)
        # The late client got what had happened before the gate opens.
        wait_for_sync(lambda: elsewhere.receipt_keys() == ["first"], "the stored receipt came")
        (tmp_path / "held").touch()
        from_b, from_a = elsewhere.join(), here.join()
        stored = httpx.get(f"{b.base}/runs/{run_id}/receipts").json()["items"]

    assert [kind for kind, _ in from_b] == ["receipt", "receipt", "receipt", "end"]
    assert from_b[-1][1] == {"run_id": run_id, "status": "succeeded"}
    assert from_b == from_a
    assert [data for kind, data in from_b if kind == "receipt"] == stored


def test_a_stream_on_the_other_replica_ends_with_the_run_cancelled_there(
    tmp_path: Path, env: dict[str, str]
) -> None:
    plan = sequential(call("held", "gated"), call("after"))
    with replicas(tmp_path, 2, {**env, **NO_POLLING}) as (a, b):
        run_id = httpx.post(f"{a.base}/plans/sequential", json=plan, headers=ASYNC).json()["run_id"]
        wait_for_sync(lambda: (tmp_path / "held.started").exists(), "the gated call started")
        stream = Stream(f"{b.base}/runs/{run_id}/events")
        assert stream.opened.wait(60)
        cancelled = httpx.post(f"{a.base}/runs/{run_id}/cancel", timeout=30)
        events = stream.join()

    assert cancelled.json()["status"] == "cancelled"
    assert [(kind, data.get("call_key")) for kind, data in events] == [
        ("receipt", "held"),
        ("receipt", "after"),
        ("end", None),
    ]
    assert events[-1][1] == {"run_id": run_id, "status": "cancelled"}


def test_a_stream_on_the_other_replica_ends_interrupted_when_the_executing_one_dies(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Nothing relays the end of a killed process: the follower's status reads (every
    # second here) find the run marked interrupted by the sweep once `a` is stale.
    quick = {
        "TOOLLOOP_HEARTBEAT_INTERVAL_S": "0.2",
        "TOOLLOOP_INSTANCE_STALE_AFTER_S": "2",
        "TOOLLOOP_RUN_EVENTS_HEARTBEAT_S": "1",
        "TOOLLOOP_RUN_EVENTS_POLL_S": "600",
    }
    plan = sequential(call("first"), call("held", "gated"))
    with replicas(tmp_path, 2, {**env, **quick}) as (a, b):
        run_id = httpx.post(f"{a.base}/plans/sequential", json=plan, headers=ASYNC).json()["run_id"]
        wait_for_sync(lambda: (tmp_path / "held.started").exists(), "the gated call started")
        stream = Stream(f"{b.base}/runs/{run_id}/events")
        wait_for_sync(lambda: stream.receipt_keys() == ["first"], "the stored receipt came")
        a.kill()
        events = stream.join()

    assert [kind for kind, _ in events] == ["receipt", "end"]
    assert events[-1][1] == {"run_id": run_id, "status": "interrupted"}
