"""Plans on the Temporal executor, end to end over HTTP: `toolloop serve` runs no tool,
one `toolloop worker` runs every call; the receipts are the local executor's."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from app.temporal.workflows import LANES_PER_ACTIVATION
from tests.support.app import AppFactory
from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack, open_stack
from tests.temporal.registry import REGISTRY

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    stack = open_stack(workdir, env, workers=1)
    yield stack
    stack.close()


SEQUENTIAL = {
    "owner": "tester",
    "calls": [
        {"call_key": "first", "tool": "echo", "args": {"text": "a", "secret": "hunter2"}},
        {"call_key": "second", "tool": "echo", "args": {"text": "b"}},
    ],
    "context": {"trace_id": "t-temporal"},
}


def test_a_sequential_plan_runs_on_the_worker(stack: Stack) -> None:
    response = stack.post("/plans/sequential", SEQUENTIAL)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "succeeded"
    assert [r["call_key"] for r in body["receipts"]] == ["first", "second"]
    assert [r["status"] for r in body["receipts"]] == ["succeeded", "succeeded"]
    assert body["receipts"][1]["output"]["text"] == "b"
    # The answer is the stored copy: the redacted argument's value is not in it.
    assert "hunter2" not in response.text
    assert "hunter2" not in stack.get(f"/runs/{body['plan_id']}/receipts").text
    run = stack.get(f"/runs/{body['plan_id']}").json()
    assert run["status"] == "succeeded"
    assert run["receipt_count"] == 2


def test_the_receipts_have_the_local_executors_shape(stack: Stack, tmp_path: Path) -> None:
    remote = stack.post("/plans/sequential", SEQUENTIAL).json()

    local = asyncio.run(_run_locally(tmp_path, SEQUENTIAL))

    for there, here in zip(remote["receipts"], local["receipts"], strict=True):
        assert there.keys() == here.keys()
        for same in ("call_key", "tool", "status", "fingerprint", "attempts", "cache_hit"):
            assert there[same] == here[same]
    assert remote.keys() == local.keys()


async def _run_locally(tmp_path: Path, plan: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from app.api.app import create_app

    settings: Settings = AppFactory(
        f"sqlite+aiosqlite:///{tmp_path / 'local.db'}", tmp_path
    ).settings(REGISTRY)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/plans/sequential", json=plan)
            assert response.status_code == 200, response.text
            answer: dict[str, Any] = response.json()
            return answer


PARALLEL = {
    "owner": "tester",
    "max_concurrency": 2,
    "lanes": [
        {"item_key": "a", "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "a1"}}]},
        {
            "item_key": "b",
            "calls": [
                {"call_key": "1", "tool": "explode", "args": {"text": "b1"}},
                {"call_key": "2", "tool": "echo", "args": {"text": "b2"}},
                {"call_key": "3", "tool": "echo", "args": {"text": "b3"}},
            ],
        },
        {
            "item_key": "c",
            "calls": [
                {"call_key": "1", "tool": "echo", "args": {"text": "c1"}},
                {"call_key": "2", "tool": "echo", "args": {"text": "c2"}},
            ],
        },
    ],
}


def test_a_parallel_plan_answers_in_input_order_and_a_failure_skips_its_lane(
    stack: Stack,
) -> None:
    response = stack.post("/plans/parallel", PARALLEL)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "failed"
    assert [lane["item_key"] for lane in body["lanes"]] == ["a", "b", "c"]
    assert [lane["status"] for lane in body["lanes"]] == ["succeeded", "failed", "succeeded"]
    failed_lane = body["lanes"][1]["receipts"]
    assert [r["status"] for r in failed_lane] == ["failed", "skipped", "skipped"]
    assert failed_lane[0]["error"]["kind"] == "exception"
    assert failed_lane[1]["error"] == {
        "kind": "cancelled",
        "message": "not run: call '1' before it did not succeed",
        "outcome_unknown": False,
    }
    batch = body["parallel_batch_id"]
    assert all(
        receipt["parallel_batch_id"] == batch
        for lane in body["lanes"]
        for receipt in lane["receipts"]
    )
    run = stack.ended_run(body["plan_id"])
    assert run["status"] == "failed"
    assert run["receipt_count"] == 6


def test_a_failing_call_skips_the_rest_of_a_sequential_plan(stack: Stack) -> None:
    plan = {
        "owner": "tester",
        "calls": [
            {"call_key": "boom", "tool": "explode", "args": {"text": "x"}},
            {"call_key": "after", "tool": "echo", "args": {"text": "y"}},
        ],
    }

    body = stack.post("/plans/sequential", plan).json()

    assert body["status"] == "failed"
    assert [r["status"] for r in body["receipts"]] == ["failed", "skipped"]
    assert len(stack.receipts(body["plan_id"])) == 2


def _workflow_count(stack: Stack) -> int:
    from temporalio.client import Client

    async def count() -> int:
        client = await Client.connect(stack.env["TOOLLOOP_TEMPORAL_ADDRESS"])
        queue = stack.env["TOOLLOOP_TEMPORAL_TASK_QUEUE"]
        return (await client.count_workflows(f"TaskQueue = '{queue}'")).count

    return asyncio.run(count())


def test_a_plan_preflight_rejects_starts_no_workflow(stack: Stack) -> None:
    before = _workflow_count(stack)
    bad = {
        "owner": "tester",
        "calls": [
            {"call_key": "1", "tool": "echo", "args": {"text": 1}},
            {"call_key": "2", "tool": "nope", "args": {}},
        ],
    }

    response = stack.post("/plans/sequential", bad)

    assert response.status_code == 422
    pointers = {error["pointer"] for error in response.json()["errors"]}
    assert {"/calls/0/args/text", "/calls/1/tool"} <= pointers
    # A plan that runs afterwards is the only workflow more (visibility lags: wait for it).
    assert stack.post("/plans/sequential", SEQUENTIAL).status_code == 200
    wait_for_sync(lambda: _workflow_count(stack) >= before + 1, "the good plan's workflow listed")
    assert _workflow_count(stack) == before + 1


def test_readiness_is_ready_while_temporal_answers(stack: Stack) -> None:
    response = stack.get("/readyz")

    assert response.status_code == 200
    assert response.json()["status"] == "ready"


def test_the_plans_deadline_stops_the_call_in_flight_and_skips_the_rest(stack: Stack) -> None:
    plan = {
        "owner": "tester",
        "deadline_s": 1.0,
        "calls": [
            {
                "call_key": "slow",
                "tool": "gate",
                "args": {"marks": str(stack.marks), "name": "never-released"},
            },
            {"call_key": "after", "tool": "echo", "args": {"text": "late"}},
        ],
    }

    body = stack.post("/plans/sequential", plan).json()

    assert body["status"] == "failed"
    slow, after = body["receipts"]
    assert slow["status"] == "timed_out"
    assert "the run's deadline" in slow["error"]["message"]
    assert after["status"] == "skipped"
    assert after["error"]["kind"] == "deadline"


def test_an_idempotency_key_replays_the_answer_of_a_plan_run_on_temporal(stack: Stack) -> None:
    headers = {"Idempotency-Key": "temporal-key-1"}

    first = stack.post("/plans/sequential", SEQUENTIAL, **headers)
    again = stack.post("/plans/sequential", SEQUENTIAL, **headers)

    assert first.status_code == 200, first.text
    assert again.status_code == 200, again.text
    assert again.json()["plan_id"] == first.json()["plan_id"]
    assert again.json()["receipts"] == first.json()["receipts"]
    assert len(stack.receipts(first.json()["plan_id"])) == 2


LARGE_LANES = 400


def test_a_plan_of_hundreds_of_lanes_at_once_ends_with_one_receipt_per_call(
    stack: Stack,
) -> None:
    failing = {
        "item_key": "lane-0",
        "calls": [
            {"call_key": "1", "tool": "explode", "args": {"text": "x"}},
            {"call_key": "2", "tool": "echo", "args": {"text": "y"}},
        ],
    }
    lanes = [failing] + [
        {
            "item_key": f"lane-{index}",
            "calls": [{"call_key": "1", "tool": "echo", "args": {"text": str(index)}}],
        }
        for index in range(1, LARGE_LANES)
    ]
    plan = {"owner": "tester", "max_concurrency": LARGE_LANES, "lanes": lanes}

    response = stack.post("/plans/parallel", plan)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "failed"
    assert [lane["item_key"] for lane in body["lanes"]] == [lane["item_key"] for lane in lanes]
    first, *rest = body["lanes"]
    assert [receipt["status"] for receipt in first["receipts"]] == ["failed", "skipped"]
    assert all(lane["status"] == "succeeded" for lane in rest)
    assert [lane["receipts"][0]["output"]["text"] for lane in rest] == [
        str(index) for index in range(1, LARGE_LANES)
    ]
    run = stack.ended_run(body["plan_id"])
    assert run["status"] == "failed"
    assert run["receipt_count"] == LARGE_LANES + 1


def test_a_plans_lanes_start_in_waves_and_two_waves_at_most_in_flight(stack: Stack) -> None:
    count = 3 * LANES_PER_ACTIVATION
    lanes = [
        {
            "item_key": f"lane-{index}",
            "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}],
        }
        for index in range(count)
    ]
    plan = {"owner": "tester", "max_concurrency": count, "lanes": lanes}

    response = stack.post("/plans/parallel", plan)

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "succeeded"
    events = stack.workflow_events(response.json()["plan_id"])
    kinds = [event.WhichOneof("attributes") for event in events]
    scheduled_by = Counter(
        event.activity_task_scheduled_event_attributes.workflow_task_completed_event_id
        for event in events
        if event.WhichOneof("attributes") == "activity_task_scheduled_event_attributes"
    )
    assert sum(scheduled_by.values()) == count
    assert len(scheduled_by) >= 3
    assert max(scheduled_by.values()) <= LANES_PER_ACTIVATION
    # Answers start the next wave; only the fallback timer (calls that all ran long,
    # as on a stalled host) may start one with a wave's calls still in flight.
    if "timer_fired_event_attributes" not in kinds:
        assert _most_calls_in_flight(events) < 2 * LANES_PER_ACTIVATION


def test_lanes_whose_calls_all_run_long_still_start_up_to_the_plans_concurrency(
    stack: Stack,
) -> None:
    count = LANES_PER_ACTIVATION + 1
    names = [f"long-{index}" for index in range(count)]
    # A worker runs 100 activities at once (the SDK's default): a second one has room.
    extra = stack.start_worker()
    lanes = [
        {
            "item_key": name,
            "calls": [
                {"call_key": "1", "tool": "gate", "args": {"marks": str(stack.marks), "name": name}}
            ],
        }
        for name in names
    ]
    plan = {"owner": "tester", "max_concurrency": count, "lanes": lanes}
    response = stack.post("/plans/parallel", plan, Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]

    def started() -> bool | None:
        return all(any(stack.marks.glob(f"{name}.started.*")) for name in names) or None

    wait_for_sync(started, "every lane's call started while none had answered")
    for name in names:
        (stack.marks / f"{name}.release").touch()
    assert stack.ended_run(run_id)["status"] == "succeeded"
    extra.stop()
    stack.workers.remove(extra)


def _most_calls_in_flight(events: list[Any]) -> int:
    """The most activities scheduled and not yet ended, over the history."""
    in_flight = most = 0
    for event in events:
        kind = event.WhichOneof("attributes")
        if kind == "activity_task_scheduled_event_attributes":
            in_flight += 1
            most = max(most, in_flight)
        elif kind in (
            "activity_task_completed_event_attributes",
            "activity_task_failed_event_attributes",
        ):
            in_flight -= 1
    return most
