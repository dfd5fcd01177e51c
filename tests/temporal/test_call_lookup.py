"""A plan call's activity, in this process on SQLite: whether its call was committed
already is one indexed row of the run, never the run's receipts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from temporalio.testing import ActivityEnvironment

from app.service.runs.records import stored_receipts
from app.service.runtime import Runtime
from app.store.models import Receipt
from app.store.repositories.runs import RunRepository
from app.temporal.activities import PlanActivities
from app.temporal.messages import CallInput, CallSpec, EndInput, RunRef
from tests.temporal.activity_runs import activity_runtime, started_run

PLANNED = 5


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with activity_runtime(tmp_path) as opened:
        yield opened


@contextmanager
def receipts_loaded() -> Iterator[list[int]]:
    """The `seq` of every receipt row the ORM loads meanwhile."""
    loaded: list[int] = []

    def on_load(target: Receipt, _context: Any) -> None:
        loaded.append(target.seq)

    event.listen(Receipt, "load", on_load)
    try:
        yield loaded
    finally:
        event.remove(Receipt, "load", on_load)


def _call(run: RunRef, seq: int) -> CallInput:
    spec = CallSpec(seq, f"c{seq}", "echo", {"text": str(seq)}, True, 60.0)
    return CallInput(run, None, spec)


async def test_a_committed_call_is_answered_from_its_own_row_alone(runtime: Runtime) -> None:
    activities = PlanActivities(runtime, heartbeat_every_s=1.0)
    environment = ActivityEnvironment()
    run = await started_run(runtime, PLANNED)
    first = [await environment.run(activities.run_call, _call(run, seq)) for seq in range(4)]

    with receipts_loaded() as loaded:
        again = await environment.run(activities.run_call, _call(run, 2))
        fresh = await environment.run(activities.run_call, _call(run, 4))

    assert again == first[2]
    assert fresh.status == "succeeded"
    assert loaded == [2]
    assert [row.seq for row in await stored_receipts(runtime.sessions, run.run_id)] == [
        0,
        1,
        2,
        3,
        4,
    ]


async def test_the_runs_end_counts_the_plans_own_calls(runtime: Runtime) -> None:
    activities = PlanActivities(runtime, heartbeat_every_s=1.0)
    environment = ActivityEnvironment()
    run = await started_run(runtime, PLANNED)
    for seq in range(3):
        await environment.run(activities.run_call, _call(run, seq))

    with receipts_loaded() as loaded:
        await environment.run(activities.end_run, EndInput(run, "failed"))

    assert loaded == []
    async with runtime.sessions() as session:
        stored = await RunRepository(session).get(run.run_id)
    assert stored is not None
    assert (stored.status, stored.call_count) == ("failed", 3)
