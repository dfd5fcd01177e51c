"""The run supervisor, with runs that record nothing: phases, stops, shutdown, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.runs.events import RunEventHub
from app.service.runs.tasks import CANCELLED, INTERRUPTED, RunResult, RunSupervisor
from app.store.database import create_database_engine, create_session_factory
from app.store.migrate import upgrade_database
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from app.store.repositories.runs import RunRepository
from tests.support.waiting import wait_for

HASH = "sha256:" + "a" * 64


class FakeRun:
    def __init__(self, run_id: str = "run-1") -> None:
        self.run_id = run_id
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.finish_gate = asyncio.Event()
        self.finish_gate.set()
        self.calls: list[str] = []
        self.fail: Exception | None = None

    async def execute(self) -> None:
        self.calls.append("execute")
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.calls.append("cancelled")
            raise
        if self.fail is not None:
            raise self.fail

    async def finish(self) -> RunResult:
        self.calls.append("finish")
        await self.finish_gate.wait()
        return self._result("succeeded")

    async def stop(self, status: str) -> RunResult:
        self.calls.append(f"stop:{status}")
        await asyncio.sleep(0)  # a stop awaits (the store) after the cancellation
        return self._result(status)

    def _result(self, status: str) -> RunResult:
        response: dict[str, Any] = {"status": status}
        return RunResult(self.run_id, status, response, lambda: response)


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    await upgrade_database(database_url)
    engine = create_database_engine(database_url)
    factory = create_session_factory(engine)
    async with factory.begin() as session:
        await ContractSnapshotRepository(session).save_if_absent(HASH, {}, 0)
        await RunRepository(session).create(
            id="run-1", kind="sequential", owner="o", contract_hash=HASH, instance_id="i"
        )
    yield factory
    await engine.dispose()


@pytest.fixture
def supervisor(sessions: async_sessionmaker[AsyncSession]) -> RunSupervisor:
    return RunSupervisor(sessions, RunEventHub())


async def test_a_run_that_ends_by_itself_finishes(supervisor: RunSupervisor) -> None:
    run = FakeRun()
    handle = supervisor.launch(run)
    assert supervisor.is_active("run-1")
    run.release.set()

    result = await handle.wait()

    assert (result.status, run.calls) == ("succeeded", ["execute", "finish"])
    assert not supervisor.is_active("run-1")


async def test_stopping_an_executing_run_cancels_it_then_records_the_stop(
    supervisor: RunSupervisor,
) -> None:
    run = FakeRun()
    handle = supervisor.launch(run)
    await run.started.wait()

    assert handle.request_stop(CANCELLED)
    result = await handle.wait()

    assert result.status == CANCELLED
    assert run.calls == ["execute", "cancelled", f"stop:{CANCELLED}"]


async def test_a_run_stopped_before_it_began_still_executes_cancelled(
    supervisor: RunSupervisor,
) -> None:
    run = FakeRun()
    handle = supervisor.launch(run)
    assert handle.request_stop(CANCELLED)  # the task has not taken a step yet

    result = await handle.wait()

    assert result.status == CANCELLED
    assert run.calls == ["execute", "cancelled", f"stop:{CANCELLED}"]


async def test_a_finishing_run_can_no_longer_be_stopped(supervisor: RunSupervisor) -> None:
    run = FakeRun()
    run.finish_gate.clear()
    handle = supervisor.launch(run)
    run.release.set()
    await wait_for(lambda: "finish" in run.calls, "the run is finishing")

    assert not handle.request_stop(CANCELLED)
    run.finish_gate.set()
    assert (await handle.wait()).status == "succeeded"


async def test_a_waiter_that_goes_away_leaves_the_run_going(supervisor: RunSupervisor) -> None:
    run = FakeRun()
    handle = supervisor.launch(run)
    waiter = asyncio.create_task(handle.wait())
    await run.started.wait()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter

    run.release.set()
    assert (await handle.wait()).status == "succeeded"


async def test_shutdown_interrupts_every_run(supervisor: RunSupervisor) -> None:
    runs = [FakeRun(f"run-{i}") for i in range(3)]
    ended: list[tuple[str, str]] = []

    async def on_end(result: RunResult | None, error: BaseException | None) -> None:
        assert result is not None
        ended.append((result.run_id, result.status))

    for run in runs:
        supervisor.launch(run, on_end=on_end)
    await runs[0].started.wait()

    await supervisor.aclose()

    assert sorted(ended) == [(f"run-{i}", INTERRUPTED) for i in range(3)]
    assert supervisor.active_count == 0
    late = FakeRun("late")
    assert (await supervisor.launch(late).wait()).status == INTERRUPTED


async def test_a_failing_run_is_recorded_interrupted_and_reports_its_error(
    supervisor: RunSupervisor, sessions: async_sessionmaker[AsyncSession]
) -> None:
    run = FakeRun()
    run.fail = RuntimeError("the tool runner broke")
    seen: list[tuple[RunResult | None, BaseException | None]] = []

    async def on_end(result: RunResult | None, error: BaseException | None) -> None:
        seen.append((result, error))
        raise ValueError("a broken hook does not break the run")

    handle = supervisor.launch(run, on_end=on_end)
    run.release.set()
    with pytest.raises(RuntimeError, match="broke"):
        await handle.wait()

    assert seen == [(None, run.fail)]
    async with sessions() as session:
        stored = await RunRepository(session).get("run-1")
    assert stored is not None
    assert stored.status == INTERRUPTED
