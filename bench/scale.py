"""Target 7: memory of a 100,000-lane plan, and the receipt writer's bounded backlog.

Memory is measured in a fresh process (`bench.memory_probe`). The backlog is
sampled while a parallel plan of no-op calls writes durable receipts to
SQLite through a writer whose bound is small enough to be reached.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

from app.engine.engine import Engine
from app.engine.run import RunIdentity
from app.store.database import create_database_engine, create_session_factory
from app.store.journal.writer import GroupCommitWriter
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from app.store.repositories.runs import RunRepository
from bench import databases, harness
from bench.stats import Check, Sample, Section

COMMAND = "BENCH_ONLY=scale .venv/bin/python -m bench"
LANES = 100_000
MAX_BACKLOG = 2_000
CONCURRENCY = 100


def _probe(lanes: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.memory_probe", str(lanes)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def _backlog(lanes: int) -> tuple[int, float]:
    built = harness.contract()
    async with databases.sqlite_database() as url:
        database = create_database_engine(url)
        sessions = create_session_factory(database)
        run_id = str(uuid.uuid4())
        async with sessions.begin() as session:
            await ContractSnapshotRepository(session).save_if_absent(built.hash, {}, 0)
            await RunRepository(session).create(
                id=run_id,
                kind="parallel",
                owner=harness.OWNER,
                contract_hash=built.hash,
                instance_id="bench",
            )
        writer = GroupCommitWriter(sessions, max_backlog=MAX_BACKLOG)
        writer.start()
        runner = Engine(built, receipts=writer, audit=writer, backpressure=writer)
        plan, admitted = harness.parallel_plan(built, "noop", lanes, CONCURRENCY)
        highest = 0
        running = True

        async def sample() -> None:
            nonlocal highest
            while running:
                highest = max(highest, writer.backlog)
                await asyncio.sleep(0)

        sampler = asyncio.create_task(sample())
        identity = RunIdentity(run_id, harness.OWNER, "bench", {}, built.hash)
        started = asyncio.get_running_loop().time()
        outcome = await runner.run_parallel(identity, plan, admitted)
        elapsed = asyncio.get_running_loop().time() - started
        running = False
        await sampler
        assert outcome.status == "succeeded"
        await runner.aclose()
        await writer.aclose()
        await database.dispose()
    return highest, elapsed


async def measure() -> Section:
    section = Section("Scale: memory and writer backlog (target 7)", COMMAND)
    probes = [_probe(LANES) for _ in range(1 if harness.QUICK else 3)]
    above_idle = Sample("MB", [p["peak_mb"] - p["idle_mb"] for p in probes])
    per_lane = Sample(
        "KB/lane", [(p["peak_mb"] - p["with_plan_mb"]) * 1024 / LANES for p in probes]
    )
    plan_itself = Sample("MB", [p["with_plan_mb"] - p["idle_mb"] for p in probes])
    section.samples[f"{LANES:,}-lane plan: peak RSS above idle"] = above_idle
    section.samples[f"{LANES:,}-lane plan: the plan and its arguments"] = plan_itself
    section.samples["engine memory per lane while running (receipts included)"] = per_lane
    section.checks.append(
        Check(
            "7 peak RSS above idle, 100,000 lanes",
            str(above_idle),
            "≤ 250 MB",
            above_idle.median <= 250,
        )
    )
    section.checks.append(
        Check("7 engine memory per pending lane", str(per_lane), "≤ 2 KB", per_lane.median <= 2.0)
    )
    lanes = 5_000 if harness.QUICK else 20_000
    highest, elapsed = await _backlog(lanes)
    allowed = MAX_BACKLOG + 3 * CONCURRENCY  # plus the rows of calls already running
    section.samples[
        f"writer backlog, {lanes:,} durable lanes on SQLite (bound {MAX_BACKLOG:,})"
    ] = Sample("rows (highest seen)", [float(highest)])
    section.notes.append(f"the backlog run took {elapsed:.1f} s")
    section.checks.append(
        Check(
            "7 writer backlog bounded (backpressure)",
            f"highest {highest:,} rows",
            f"≤ {allowed:,} (bound + rows of calls in flight)",
            highest <= allowed,
        )
    )
    return section
