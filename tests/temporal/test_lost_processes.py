"""Processes lost mid-run on the Temporal executor: a worker killed -9 mid-call (a
second worker takes over), and the API process killed -9 while its run goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack, open_stack

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    stack = open_stack(workdir, env, workers=2)
    yield stack
    stack.close()


def _start(stack: Stack, tool: str, name: str) -> str:
    plan = {
        "owner": "tester",
        "calls": [
            {"call_key": "gate", "tool": tool, "args": {"marks": str(stack.marks), "name": name}},
            {"call_key": "after", "tool": "echo", "args": {"text": "after"}},
        ],
    }
    response = stack.post("/plans/sequential", plan, Prefer="respond-async")
    assert response.status_code == 202, response.text
    return response.headers["Location"].rsplit("/", 1)[1]


def _started_in(stack: Stack, name: str) -> list[int]:
    """The pids of the processes whose attempt of the gate `name` started."""
    marks = stack.marks.glob(f"{name}.started.*")
    return sorted(int(path.name.rsplit(".", 1)[1]) for path in marks)


def _kill_the_worker_running(stack: Stack, name: str) -> int:
    (pid,) = wait_for_sync(lambda: _started_in(stack, name), f"the gate {name} started")
    (worker,) = [worker for worker in stack.workers if worker.pid == pid]
    worker.kill()
    stack.workers.remove(worker)
    return pid


def _by_key(receipts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {receipt["call_key"]: receipt for receipt in receipts}


def test_an_idempotent_call_of_a_killed_worker_runs_again_on_another(stack: Stack) -> None:
    run_id = _start(stack, "gate", "idempotent")
    killed = _kill_the_worker_running(stack, "idempotent")
    (stack.marks / "idempotent.release").touch()

    run = stack.ended_run(run_id)

    assert run["status"] == "succeeded"
    started = _started_in(stack, "idempotent")
    assert len(started) == 2
    assert killed in started
    receipts = stack.receipts(run_id)
    assert [r["call_key"] for r in receipts] == ["gate", "after"]  # one receipt per call
    gate = _by_key(receipts)["gate"]
    assert gate["status"] == "succeeded"
    assert gate["output"]["pid"] != killed
    assert gate["idempotency_key"] == f"{run_id}:0"
    stack.start_worker()  # two workers again for the next test


def test_a_non_idempotent_call_of_a_killed_worker_ends_outcome_unknown(stack: Stack) -> None:
    run_id = _start(stack, "gate_once", "once")
    _kill_the_worker_running(stack, "once")
    (stack.marks / "once.release").touch()

    run = stack.ended_run(run_id)

    assert run["status"] == "failed"
    assert len(_started_in(stack, "once")) == 1  # never run again
    receipts = _by_key(stack.receipts(run_id))
    assert len(receipts) == 2
    assert receipts["gate"]["status"] == "failed"
    assert receipts["gate"]["error"]["kind"] == "interrupted"
    assert receipts["gate"]["error"]["outcome_unknown"] is True
    assert receipts["after"]["status"] == "skipped"
    stack.start_worker()


def test_a_run_goes_on_when_the_api_process_is_killed(stack: Stack) -> None:
    run_id = _start(stack, "gate", "api-killed")
    wait_for_sync(lambda: _started_in(stack, "api-killed"), "the gate started")
    assert stack.server is not None
    stack.server.kill()
    (stack.marks / "api-killed.release").touch()

    stack.serve()  # a new API process; its start marks stopped processes' runs interrupted
    run = stack.ended_run(run_id)

    assert run["status"] == "succeeded"
    assert [r["status"] for r in stack.receipts(run_id)] == ["succeeded", "succeeded"]


def test_a_cancel_cancels_the_workflow_the_call_in_flight_and_skips_the_rest(
    stack: Stack,
) -> None:
    run_id = _start(stack, "gate", "cancelled")
    wait_for_sync(lambda: _started_in(stack, "cancelled"), "the gate started")

    response = stack.post(f"/runs/{run_id}/cancel", {})

    assert response.status_code in (200, 202), response.text
    run = stack.ended_run(run_id)
    assert run["status"] == "cancelled"
    receipts = _by_key(stack.receipts(run_id))
    assert receipts["gate"]["error"]["kind"] == "cancelled"
    assert receipts["after"]["status"] == "skipped"
    assert len(_started_in(stack, "cancelled")) == 1


def test_a_run_whose_api_process_died_is_cancelled_from_another(stack: Stack) -> None:
    run_id = _start(stack, "gate", "cancel-elsewhere")
    wait_for_sync(lambda: _started_in(stack, "cancel-elsewhere"), "the gate started")
    assert stack.server is not None
    stack.server.kill()
    stack.serve()

    response = stack.post(f"/runs/{run_id}/cancel", {})

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    assert stack.ended_run(run_id)["status"] == "cancelled"
    receipts = _by_key(stack.receipts(run_id))
    assert receipts["gate"]["error"]["kind"] == "cancelled"
    assert receipts["after"]["status"] == "skipped"


def test_a_cancelled_fan_out_skips_every_lane_in_one_activity(stack: Stack) -> None:
    gate = {"call_key": "gate", "tool": "gate", "args": {"marks": str(stack.marks), "name": "fan"}}
    echo = {"call_key": "echo", "tool": "echo", "args": {"text": "x"}}
    plan = {
        "owner": "tester",
        "max_concurrency": 1,
        "lanes": [{"item_key": "held", "calls": [gate, echo]}]
        + [
            {"item_key": f"lane{index}", "calls": [echo, echo | {"call_key": "again"}]}
            for index in range(40)
        ],
    }
    response = stack.post("/plans/parallel", plan, Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]
    wait_for_sync(lambda: _started_in(stack, "fan"), "the gate started")

    assert stack.post(f"/runs/{run_id}/cancel", {}).status_code in (200, 202)

    assert stack.ended_run(run_id)["status"] == "cancelled"
    receipts = stack.receipts(run_id)
    assert len(receipts) == 82
    assert {r["status"] for r in receipts} == {"skipped"}
    assert {r["error"]["kind"] for r in receipts} == {"cancelled"}
    assert _local_activities(stack, run_id, "toolloop.skip_calls") == 1


def _local_activities(stack: Stack, run_id: str, activity: str) -> int:
    """How many times the run's workflow ran the local activity `activity`."""
    from temporalio.client import Client

    from app.temporal.handles import workflow_id

    async def count() -> int:
        client = await Client.connect(stack.env["TOOLLOOP_TEMPORAL_ADDRESS"])
        history = await client.get_workflow_handle(workflow_id(run_id)).fetch_history()
        return sum(
            activity.encode() in payload.data
            for event in history.events
            if event.HasField("marker_recorded_event_attributes")
            for payload in event.marker_recorded_event_attributes.details["data"].payloads
        )

    return asyncio.run(count())
