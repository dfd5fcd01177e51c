"""A plan paused for confirmation on one replica, decided on the other.

The decision is recorded under the run's row lock wherever it arrives; the
replica that decided continues the run. Each call runs once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.replicas.tools import call, calls, sequential
from tests.support.replicas import replicas
from tests.support.waiting import wait_for_sync

pytestmark = pytest.mark.postgres
PLAN = sequential(call("first"), call("asked", "guarded"), call("after"))


def _ended(base: str, run_id: str) -> dict[str, Any] | None:
    run: dict[str, Any] = httpx.get(f"{base}/runs/{run_id}").json()
    return None if run["status"] in ("pending", "running") else run


def _decide(base: str, run_id: str, confirmation_id: str, approve: bool) -> httpx.Response:
    return httpx.post(
        f"{base}/runs/{run_id}/confirmations/{confirmation_id}",
        json={"approve": approve, "reason": "decided on the other replica"},
        timeout=30,
    )


@pytest.mark.parametrize(
    ("approve", "status", "receipts"),
    [
        (True, "succeeded", ["succeeded", "succeeded", "succeeded"]),
        (False, "failed", ["succeeded", "denied", "skipped"]),
    ],
)
def test_a_plan_paused_on_one_replica_is_decided_and_continued_on_the_other(
    tmp_path: Path, env: dict[str, str], approve: bool, status: str, receipts: list[str]
) -> None:
    with replicas(tmp_path, 2, env) as (a, b):
        paused = httpx.post(f"{a.base}/plans/sequential", json=PLAN, timeout=30).json()
        run_id = paused["plan_id"]
        (waiting,) = paused["pending"]
        decided = _decide(b.base, run_id, waiting["confirmation_id"], approve)
        again = _decide(a.base, run_id, waiting["confirmation_id"], approve)
        run = wait_for_sync(lambda: _ended(a.base, run_id), "the run ended")
        stored = httpx.get(f"{a.base}/runs/{run_id}/receipts").json()["items"]

    assert paused["status"] == "pending"
    assert decided.status_code == 202, decided.text
    assert again.status_code == 409
    assert run["status"] == status
    assert [(r["call_key"], r["status"]) for r in stored] == list(
        zip(["first", "asked", "after"], receipts, strict=True)
    )
    ran = ["first", "asked", "after"] if approve else ["first"]
    assert calls(tmp_path) == ran


def test_a_plan_paused_on_one_replica_is_cancelled_on_the_other(
    tmp_path: Path, env: dict[str, str]
) -> None:
    with replicas(tmp_path, 2, env) as (a, b):
        run_id = httpx.post(f"{a.base}/plans/sequential", json=PLAN, timeout=30).json()["plan_id"]
        cancelled = httpx.post(f"{b.base}/runs/{run_id}/cancel", timeout=30)
        run = httpx.get(f"{a.base}/runs/{run_id}").json()
        listed = httpx.get(f"{a.base}/confirmations", params={"status": "pending"}).json()

    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {"run_id": run_id, "status": "cancelled"}
    assert run["status"] == "cancelled"
    assert listed["items"] == []
