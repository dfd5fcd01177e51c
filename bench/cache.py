"""Target 5: a cache hit against a miss of the same no-op tool.

A miss looks the entry up, runs the call and writes its receipt with the new
entry; a hit answers from the entry. Both through the production wiring on
SQLite (durable receipts, the database cache behind the in-process copies),
and, for reference, with persistence taken out (in-memory store, null sinks).
"""

from __future__ import annotations

import itertools
import uuid

from app.contract import Contract
from app.engine.engine import Engine
from app.engine.memory import MemoryCacheStore
from app.engine.run import RunIdentity
from app.service.runtime import open_runtime
from app.settings import Settings
from app.store.repositories.runs import RunRepository
from bench import databases, harness
from bench.stats import Check, Measure, Section, cpu_clock, ratios, rounds, wall_clock

COMMAND = "BENCH_ONLY=cache .venv/bin/python -m bench"
CALLS = 200


def _pair(
    built: Contract, runner: Engine, clock: object, open_run: object
) -> tuple[Measure, Measure]:
    batch = itertools.count()
    last: list[list[dict[str, str]]] = []

    async def run(args: list[dict[str, str]]) -> float:
        plan, admitted = harness.sequential_plan(built, "noop_cached", CALLS, args)
        started = clock()  # type: ignore[operator]
        identity = await open_run()  # type: ignore[operator]
        outcome = await runner.run_sequential(identity, plan, admitted)
        elapsed = clock() - started  # type: ignore[operator]
        assert outcome.status == "succeeded"
        return elapsed / CALLS * 1e6  # type: ignore[no-any-return]

    async def miss() -> float:
        number = next(batch)
        args = [{"text": f"{number}-{index}"} for index in range(CALLS)]
        last.append(args)
        return await run(args)

    async def hit() -> float:
        return await run(last[-1])

    return miss, hit


async def measure() -> Section:
    section = Section("Cache hit vs miss (target 5)", COMMAND)
    built = harness.contract()

    memory_runner = harness.engine(built, cache=MemoryCacheStore())

    async def memory_identity() -> RunIdentity:
        return harness.identity(built)

    async with databases.sqlite_database() as url:
        runtime = await open_runtime(
            Settings(registries=[harness.REGISTRY], database_url=url), built
        )

        async def durable_identity() -> RunIdentity:
            run_id = str(uuid.uuid4())
            async with runtime.sessions.begin() as session:
                await RunRepository(session).create(
                    id=run_id,
                    kind="sequential",
                    owner=harness.OWNER,
                    contract_hash=built.hash,
                    instance_id=runtime.instance_id,
                )
            return RunIdentity(run_id, harness.OWNER, "bench", {}, built.hash)

        durable_miss, durable_hit = _pair(built, runtime.engine, wall_clock, durable_identity)
        memory_miss, memory_hit = _pair(built, memory_runner, cpu_clock, memory_identity)
        subjects = {"durable miss": durable_miss, "durable hit": durable_hit}
        samples = await rounds(subjects, 5 if harness.QUICK else 15, "µs/call (wall)")
        memory = await rounds(
            {"memory miss": memory_miss, "memory hit": memory_hit},
            5 if harness.QUICK else 15,
            "µs/call (CPU)",
        )
        await runtime.aclose()
    await memory_runner.aclose()
    section.samples["SQLite, durable: miss"] = samples["durable miss"]
    section.samples["SQLite, durable: hit"] = samples["durable hit"]
    ratio = ratios(samples["durable hit"], samples["durable miss"])
    section.samples["SQLite, durable: hit / miss"] = ratio
    section.samples["persistence excluded: miss"] = memory["memory miss"]
    section.samples["persistence excluded: hit"] = memory["memory hit"]
    reference = ratios(memory["memory hit"], memory["memory miss"])
    section.samples["persistence excluded: hit / miss"] = reference
    section.checks.append(
        Check("5 cache hit vs miss (durable, SQLite)", str(ratio), "≤ 0.2x", ratio.median <= 0.2)
    )
    section.checks.append(
        Check(
            "5 cache hit vs miss (persistence excluded)",
            str(reference),
            "≤ 0.2x",
            None,
            "reference only: with no query to save, a hit differs from a miss by the "
            "watchdog, admission, invocation and one audit event",
        )
    )
    return section
