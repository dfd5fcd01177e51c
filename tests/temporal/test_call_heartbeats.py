"""A plan call's activity heartbeats only while its call runs longer than a period."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from app.service.runtime import Runtime
from app.temporal.activities import PlanActivities
from app.temporal.messages import CallInput, CallSpec
from tests.temporal.activity_runs import activity_runtime, started_run


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with activity_runtime(tmp_path) as opened:
        yield opened


def _heartbeats_into(beats: list[object], beat: asyncio.Event | None = None) -> ActivityEnvironment:
    environment = ActivityEnvironment()

    def on_heartbeat(*details: object) -> None:
        beats.append(details)
        if beat is not None:
            beat.set()

    environment.on_heartbeat = on_heartbeat
    return environment


async def test_a_call_that_ends_within_a_period_sends_no_heartbeat(runtime: Runtime) -> None:
    beats: list[object] = []
    activities = PlanActivities(runtime, heartbeat_every_s=3600.0)
    run = await started_run(runtime, 1)
    call = CallSpec(0, "c0", "echo", {"text": "x"}, True, 60.0)

    result = await _heartbeats_into(beats).run(activities.run_call, CallInput(run, None, call))

    assert result.status == "succeeded"
    assert beats == []


async def test_a_call_that_outlasts_a_period_heartbeats(runtime: Runtime, tmp_path: Path) -> None:
    beats: list[object] = []
    beat = asyncio.Event()
    activities = PlanActivities(runtime, heartbeat_every_s=0.001)
    run = await started_run(runtime, 1)
    args = {"marks": str(tmp_path), "name": "held"}
    call = CallSpec(0, "c0", "gate", args, True, 60.0)
    environment = _heartbeats_into(beats, beat)

    running = asyncio.create_task(environment.run(activities.run_call, CallInput(run, None, call)))
    await asyncio.wait_for(beat.wait(), timeout=60)
    (tmp_path / "held.release").touch()
    result = await running

    assert result.status == "succeeded"
    assert beats
