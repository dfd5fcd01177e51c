"""One-call plans of a `max_concurrency` tool through the engine, one process alone,
admission held with other processes on PostgreSQL: idle slots kept (a released slot
stays locked for the next call) against every release unlocked at once (as a
process does while another asks for the tool's slots), the local gate as the floor.

`python -m bench.shared_slots [postgres-url]` (default: the tests' database in
`TOOLLOOP_TEST_POSTGRES_URL`). Variants alternate within each round, so that a busy
host's drift falls on all of them alike; the figure is plans per second by the
wall clock (a round trip is waiting, not CPU).
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from app.engine.engine import Engine
from app.store.database import database_target, postgres_conninfo
from app.store.migrate import upgrade_database
from app.store.shared_limits import PostgresSharedLimits
from bench import harness

TOOL = "noop"  # max_concurrency 1000 in bench/registry.yml
PLANS = 300 if harness.QUICK else 1000
ROUNDS = 3 if harness.QUICK else 5


async def main(url: str) -> None:
    await upgrade_database(url)
    conninfo = postgres_conninfo(url)
    assert conninfo is not None, "a PostgreSQL URL"
    built = harness.contract()
    plan, admitted = harness.sequential_plan(built, TOOL, 1)
    local = harness.engine(built)
    kept = PostgresSharedLimits(conninfo, database_target(url))
    unlocked = PostgresSharedLimits(conninfo, database_target(url))
    await kept.start()
    await unlocked.start()
    # Asked for as far as it knows: every release unlocks (the cache off).
    unlocked._yielding[TOOL] = math.inf
    engines = {
        "local gate": local,
        "shared, idle slots kept": harness.engine(built, shared_limits=kept),
        "shared, every release unlocked": harness.engine(built, shared_limits=unlocked),
    }

    def plans_per_s(engine: Engine) -> Callable[[], Awaitable[float]]:
        async def measure() -> float:
            started = time.perf_counter()
            for _ in range(PLANS):
                await harness.run_sequential(engine, built, plan, admitted)
            return PLANS / (time.perf_counter() - started)

        return measure

    figures: dict[str, list[float]] = {name: [] for name in engines}
    try:
        for engine in engines.values():  # warm up
            await plans_per_s(engine)()
        for _ in range(ROUNDS):
            for name, engine in engines.items():
                figures[name].append(await plans_per_s(engine)())
    finally:
        for engine in engines.values():
            await engine.aclose()
        await kept.aclose()
        await unlocked.aclose()

    print(f"{PLANS} one-call plans of `{TOOL}` per measurement, {ROUNDS} rounds")
    for name, values in figures.items():
        print(
            f"  {name:32s} median {statistics.median(values):8.0f} plans/s  {values_line(values)}"
        )
    pairs = [
        kept_s / unlocked_s
        for kept_s, unlocked_s in zip(
            figures["shared, idle slots kept"],
            figures["shared, every release unlocked"],
            strict=True,
        )
    ]
    print(f"  kept / unlocked, per round: {values_line(pairs, '.1f')}")
    floor = [
        kept_s / local_s
        for kept_s, local_s in zip(
            figures["shared, idle slots kept"], figures["local gate"], strict=True
        )
    ]
    print(f"  kept / local gate, per round: {values_line(floor, '.2f')}")


def values_line(values: list[float], spec: str = ".0f") -> str:
    return " ".join(format(value, spec) for value in values)


if __name__ == "__main__":
    default = os.environ.get("TOOLLOOP_TEST_POSTGRES_URL", "")
    target = sys.argv[1] if len(sys.argv) > 1 else default
    if not target:
        sys.exit("usage: python -m bench.shared_slots postgresql+psycopg://...")
    asyncio.run(main(target))
