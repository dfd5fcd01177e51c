"""Plan activities run in this process on SQLite (no worker, no dev server): the
runtime they run on and a run recorded as an orchestrated one's start."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from app.contract import load_contract
from app.service.runs.records import record_run_start
from app.service.runtime import Runtime, open_runtime
from app.temporal.messages import RunRef
from tests.support.app import AppFactory
from tests.temporal.registry import REGISTRY


@asynccontextmanager
async def activity_runtime(folder: Path) -> AsyncIterator[Runtime]:
    settings = AppFactory(f"sqlite+aiosqlite:///{folder / 'calls.db'}", folder).settings(REGISTRY)
    opened = await open_runtime(settings, load_contract(settings.registries))
    try:
        yield opened
    finally:
        await opened.aclose()


async def started_run(runtime: Runtime, planned_calls: int) -> RunRef:
    """A sequential run of `planned_calls` calls, its start recorded as `serve` records
    an orchestrated run's."""
    run = RunRef(
        run_id=uuid.uuid4().hex,
        owner="tester",
        caller=None,
        contract_hash=runtime.engine.contract.hash,
        kind="sequential",
        context={},
        planned_calls=planned_calls,
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
