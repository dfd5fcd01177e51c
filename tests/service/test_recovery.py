from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.api.app import create_app
from app.settings import Settings
from app.store.journal.batch import Batch
from app.store.journal.session import insert as journal_insert
from app.store.repositories.instances import InstanceRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "registries" / "example.yml"


def _receipt(run_id: str) -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "id": f"{run_id}-r0",
        "run_id": run_id,
        "seq": 0,
        "call_key": "c1",
        "tool": "word_count",
        "owner": "text-worker",
        "status": "succeeded",
        "output": {"words": 2},
        "attempts": 1,
        "fingerprint": "sha256:" + "0" * 64,
        "idempotency_key": f"{run_id}:0",
        "started_at": now,
        "finished_at": now,
        "duration_ms": 1.0,
    }


async def test_runs_left_running_by_a_gone_process_are_interrupted_at_start(
    database_url: str,
) -> None:
    settings = Settings(registries=[EXAMPLE_REGISTRY], database_url=database_url)
    first = create_app(settings)
    async with first.router.lifespan_context(first):
        runtime = first.state.runtime
        async with runtime.sessions.begin() as session:
            runs = RunRepository(session)
            await runs.create(
                id="orphan",
                kind="sequential",
                owner="text-worker",
                contract_hash=runtime.contract.hash,
                instance_id="a-process-that-crashed",
            )
            await journal_insert(session, Batch(receipts=[_receipt("orphan")]))
            await runs.create(
                id="alive",
                kind="parallel",
                owner="text-worker",
                contract_hash=runtime.contract.hash,
                instance_id="a-live-replica",
            )
            await InstanceRepository(session).register(
                "a-live-replica", hostname="elsewhere", pid=1
            )

    second = create_app(settings)
    async with (
        second.router.lifespan_context(second),
        second.state.runtime.sessions() as session,
    ):
        orphan = await RunRepository(session).get("orphan")
        alive = await RunRepository(session).get("alive")
        receipts = await ReceiptRepository(session).list_for_run("orphan")
    assert orphan is not None
    assert orphan.status == "interrupted"
    assert orphan.finished_at is not None
    assert [(r.call_key, r.status, r.output) for r in receipts] == [
        ("c1", "succeeded", {"words": 2})
    ]
    assert alive is not None
    assert alive.status == "running"


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited."""
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(finished.stdout)


async def test_runs_of_a_dead_process_on_this_host_are_interrupted_without_waiting(
    database_url: str, dead_pid: int
) -> None:
    settings = Settings(registries=[EXAMPLE_REGISTRY], database_url=database_url)
    first = create_app(settings)
    async with first.router.lifespan_context(first):
        runtime = first.state.runtime
        async with runtime.sessions.begin() as session:
            await InstanceRepository(session).register(
                "crashed-just-now", hostname=socket.gethostname(), pid=dead_pid
            )
            await RunRepository(session).create(
                id="fresh-orphan",
                kind="sequential",
                owner="text-worker",
                contract_hash=runtime.contract.hash,
                instance_id="crashed-just-now",
            )
            await InstanceRepository(session).register(
                "me-too", hostname=socket.gethostname(), pid=os.getpid()
            )

    second = create_app(settings)
    async with (
        second.router.lifespan_context(second),
        second.state.runtime.sessions() as session,
    ):
        run = await RunRepository(session).get("fresh-orphan")
        still_registered = await InstanceRepository(session).get("me-too")
    assert run is not None
    assert run.status == "interrupted"
    assert still_registered is not None
