"""A plan call's activity heartbeats only while its call runs longer than a period."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from app.contract import load_contract
from app.service.runs.records import record_run_start
from app.service.runtime import Runtime, open_runtime
from app.temporal.activities import PlanActivities
from app.temporal.messages import CallInput, CallSpec, RunRef
from tests.support.app import AppFactory
from tests.temporal.registry import REGISTRY


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AppFactory(f"sqlite+aiosqlite:///{tmp_path / 'calls.db'}", tmp_path).settings(
        REGISTRY
    )
    opened = await open_runtime(settings, load_contract(settings.registries))
    yield opened
    await opened.aclose()


async def _started_run(runtime: Runtime) -> RunRef:
    run = RunRef(
        run_id=uuid.uuid4().hex,
        owner="tester",
        caller=None,
        contract_hash=runtime.engine.contract.hash,
        kind="sequential",
        context={},
        planned_calls=1,
    )
    await record_run_start(
        runtime.sessions,
        run_id=run.run_id,
        kind=run.kind,
        owner=run.owner,
        contract_hash=run.contract_hash,
        instance_id="orchestrated",
        caller=None,
    )
    return run


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
    run = await _started_run(runtime)
    call = CallSpec(0, "c0", "echo", {"text": "x"}, True, 60.0)

    result = await _heartbeats_into(beats).run(activities.run_call, CallInput(run, None, call))

    assert result.status == "succeeded"
    assert beats == []


async def test_a_call_that_outlasts_a_period_heartbeats(runtime: Runtime, tmp_path: Path) -> None:
    beats: list[object] = []
    beat = asyncio.Event()
    activities = PlanActivities(runtime, heartbeat_every_s=0.001)
    run = await _started_run(runtime)
    args = {"marks": str(tmp_path), "name": "held"}
    call = CallSpec(0, "c0", "gate", args, True, 60.0)
    environment = _heartbeats_into(beats, beat)

    running = asyncio.create_task(environment.run(activities.run_call, CallInput(run, None, call)))
    await asyncio.wait_for(beat.wait(), timeout=60)
    (tmp_path / "held.release").touch()
    result = await running

    assert result.status == "succeeded"
    assert beats
