"""`GET /runs/{id}/events` of a plan on Temporal: the workers relay each receipt as
their journal commits it, to the serve process that started the run and to any
other, then the run's end. Polling is turned off (both intervals 600 s), so only
the relay can bring a receipt before the test lets the next call end."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import ServerProcess
from tests.support.event_stream import Stream
from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack, open_stack

pytestmark = pytest.mark.postgres

ASYNC = {"Prefer": "respond-async"}
NO_POLLING = {"TOOLLOOP_RUN_EVENTS_POLL_S": "600", "TOOLLOOP_RUN_EVENTS_HEARTBEAT_S": "600"}


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    # Two workers: whichever runs a call relays its receipt.
    stack = open_stack(workdir, {**env, **NO_POLLING}, workers=2)
    yield stack
    stack.close()


@pytest.fixture(scope="module")
def other_serve(stack: Stack) -> Iterator[ServerProcess]:
    """A second serve process on the same database and Temporal: it starts no run here."""
    server = ServerProcess(stack.workdir, [], stack.env, log_name="server-other.log")
    try:
        server.wait_until_answering()
        yield server
    finally:
        server.stop()


def _gated(stack: Stack, *names: str) -> dict[str, Any]:
    return {
        "owner": "tester",
        "calls": [
            {"call_key": name, "tool": "gate", "args": {"marks": str(stack.marks), "name": name}}
            for name in names
        ],
    }


def _started(stack: Stack, name: str) -> bool:
    return any(stack.marks.glob(f"{name}.started.*"))


def _release(stack: Stack, name: str) -> None:
    (stack.marks / f"{name}.release").touch()


@pytest.mark.parametrize("where", ["the serve that started it", "another serve"])
def test_a_stream_gets_each_receipt_before_the_next_call_ends(
    stack: Stack, other_serve: ServerProcess, where: str
) -> None:
    # One stream at a time: a follower elsewhere has the workers relay the run to every
    # process, this one's stream included.
    base = stack.base if where == "the serve that started it" else other_serve.base
    first, second, third = (f"{key}-{uuid.uuid4().hex[:8]}" for key in ("a", "b", "c"))
    response = stack.post("/plans/sequential", _gated(stack, first, second, third), **ASYNC)
    assert response.status_code == 202, response.text
    run_id = response.json()["run_id"]
    wait_for_sync(lambda: _started(stack, first), "the first call started")
    stream = Stream(f"{base}/runs/{run_id}/events")
    assert stream.opened.wait(60)

    _release(stack, first)
    wait_for_sync(lambda: stream.receipt_keys() == [first], "the first receipt came")
    # The stream has read the store by now: the second receipt can only be relayed.
    wait_for_sync(lambda: _started(stack, second), "the second call started")
    _release(stack, second)
    wait_for_sync(lambda: stream.receipt_keys() == [first, second], "the second receipt came")
    assert stack.get(f"/runs/{run_id}").json()["status"] == "running"  # the third is held
    wait_for_sync(lambda: _started(stack, third), "the third call started")
    _release(stack, third)
    events = stream.join()

    assert [kind for kind, _ in events] == ["receipt", "receipt", "receipt", "end"]
    assert events[-1][1] == {"run_id": run_id, "status": "succeeded"}
    assert [data for kind, data in events if kind == "receipt"] == stack.receipts(run_id)


def test_a_stream_elsewhere_ends_with_the_status_the_worker_recorded(
    stack: Stack, other_serve: ServerProcess
) -> None:
    held = f"held-{uuid.uuid4().hex[:8]}"
    plan = _gated(stack, held)
    plan["calls"].insert(0, {"call_key": "first", "tool": "echo", "args": {"text": "w"}})
    plan["calls"].append({"call_key": "boom", "tool": "explode", "args": {"text": "x"}})
    plan["calls"].append({"call_key": "never", "tool": "echo", "args": {"text": "y"}})
    run_id = stack.post("/plans/sequential", plan, **ASYNC).json()["run_id"]
    wait_for_sync(lambda: _started(stack, held), "the held call started")
    stream = Stream(f"{other_serve.base}/runs/{run_id}/events")
    # The stored receipt comes once the stream follows the run.
    wait_for_sync(lambda: stream.receipt_keys() == ["first"], "the stored receipt came")

    _release(stack, held)
    events = stream.join()

    assert [(kind, data.get("call_key")) for kind, data in events] == [
        ("receipt", "first"),
        ("receipt", held),
        ("receipt", "boom"),
        ("receipt", "never"),
        ("end", None),
    ]
    assert [data["status"] for _, data in events] == [
        "succeeded",
        "succeeded",
        "failed",
        "skipped",
        "failed",
    ]
    assert events[-1][1] == {"run_id": run_id, "status": "failed"}
