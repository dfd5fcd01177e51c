"""Target 3: parallel efficiency, and target 7's time scaling.

10,000 (and 1,000) lanes of one 10 ms call at max_concurrency 100, against a
raw `asyncio.Semaphore(100)` fan-out of the same sleeps, in the same rounds;
then 100,000 lanes against 10,000. Wall clock: the work is waiting.
"""

from __future__ import annotations

import asyncio

from bench import harness
from bench.stats import Check, Measure, Section, ratios, rounds, wall_clock

COMMAND = "BENCH_ONLY=parallel .venv/bin/python -m bench"
CONCURRENCY = 100
SLEEP_S = 0.01


def semaphore_floor(lanes: int) -> Measure:
    async def measure() -> float:
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def one() -> None:
            async with semaphore:
                await asyncio.sleep(SLEEP_S)

        started = wall_clock()
        await asyncio.gather(*(one() for _ in range(lanes)))
        return wall_clock() - started

    return measure


def engine_lanes(lanes: int) -> Measure:
    built = harness.contract()
    runner = harness.engine(built)
    plan, admitted = harness.parallel_plan(built, "sleep_10ms", lanes, CONCURRENCY)

    async def measure() -> float:
        started = wall_clock()
        outcome = await harness.run_parallel(runner, built, plan, admitted)
        elapsed = wall_clock() - started
        assert len(outcome.lanes) == lanes
        return elapsed

    return measure


async def measure() -> Section:
    section = Section("Parallel efficiency (target 3) and scaling (target 7)", COMMAND)
    for lanes, bound in ((10_000, 1.10), (1_000, 1.5)):
        ideal = lanes / CONCURRENCY * SLEEP_S
        samples = await rounds(
            {"raw semaphore": semaphore_floor(lanes), "engine": engine_lanes(lanes)},
            3 if harness.QUICK else 7,
            "s",
        )
        floor, engine = samples["raw semaphore"], samples["engine"]
        section.samples[f"{lanes:,} lanes: raw Semaphore({CONCURRENCY}) fan-out"] = floor
        section.samples[f"{lanes:,} lanes: engine, max_concurrency {CONCURRENCY}"] = engine
        ratio = ratios(engine, floor)
        section.samples[f"{lanes:,} lanes: engine / raw semaphore"] = ratio
        section.notes.append(
            f"{lanes:,} lanes: ideal {ideal:.2f} s; raw semaphore {floor.median / ideal:.2f}x "
            f"ideal, engine {engine.median / ideal:.2f}x ideal"
        )
        section.checks.append(
            Check(
                f"3 {lanes:,} lanes vs raw semaphore",
                str(ratio),
                f"≤ {bound}x",
                ratio.median <= bound,
            )
        )
    small, large = (2_000, 20_000) if harness.QUICK else (10_000, 100_000)
    samples = await rounds(
        {"small": engine_lanes(small), "large": engine_lanes(large)}, 1 if harness.QUICK else 3, "s"
    )
    section.samples[f"{small:,} lanes (engine)"] = samples["small"]
    section.samples[f"{large:,} lanes (engine)"] = samples["large"]
    scale = ratios(samples["large"], samples["small"])
    section.samples[f"{large:,} / {small:,} lanes"] = scale
    section.checks.append(
        Check(f"7 time for {large:,} lanes vs {small:,}", str(scale), "≤ 11x", scale.median <= 11)
    )
    return section
