"""Target 1: per-call overhead of a no-op tool, persistence excluded.

Floors: a raw await of the tool and an `asyncio.timeout` block around it.
The engine runs the full pipeline (both schema gates, fingerprint, admission
gate, watchdog, execution context, audit events, receipt, redacted stored
copy) with sinks that persist nothing. Peers: Pydantic AI (function model)
and LangGraph (ToolNode), in-process, the same tool.
"""

from __future__ import annotations

import asyncio

from bench import celery_peer, harness, peers
from bench.stats import Check, Measure, Section, cpu_clock, ratios, rounds
from bench.tools import noop

CALLS = 1000  # per measurement of the floors and of the engine's plan
PEER_CALLS = 100  # tool calls per peer run (and per engine plan, for the like-for-like figure)
COMMAND = "BENCH_ONLY=overhead .venv/bin/python -m bench"


async def measure() -> Section:
    section = Section("Per-call overhead (target 1)", COMMAND)
    built = harness.contract()
    runner = harness.engine(built)
    plan, admitted = harness.sequential_plan(built, "noop", CALLS)
    small_plan, small_admitted = harness.sequential_plan(built, "noop", PEER_CALLS)
    args = harness.ARGS

    async def raw_await() -> float:
        started = cpu_clock()
        for _ in range(CALLS):
            await noop(**args)
        return (cpu_clock() - started) / CALLS * 1e6

    async def timeout_block() -> float:
        started = cpu_clock()
        for _ in range(CALLS):
            async with asyncio.timeout(30):
                await noop(**args)
        return (cpu_clock() - started) / CALLS * 1e6

    async def engine_plan() -> float:
        started = cpu_clock()
        await harness.run_sequential(runner, built, plan, admitted)
        return (cpu_clock() - started) / CALLS * 1e6

    async def engine_small_plan() -> float:
        started = cpu_clock()
        await harness.run_sequential(runner, built, small_plan, small_admitted)
        return (cpu_clock() - started) / PEER_CALLS * 1e6

    async def engine_run_call() -> float:
        state = runner.open_run(harness.identity(built))
        started = cpu_clock()
        for index in range(CALLS):
            await runner.run_call(state, "noop", args, call_key=str(index))
        return (cpu_clock() - started) / CALLS * 1e6

    pydantic_runs = peers.pydantic_ai_runs(PEER_CALLS)
    graph_runs = peers.langgraph_runs(PEER_CALLS)

    def amortized(run: peers.PeerRun) -> Measure:
        async def measure_run() -> float:
            started = cpu_clock()
            await run()
            return (cpu_clock() - started) / PEER_CALLS * 1e6

        return measure_run

    subjects: dict[str, Measure] = {
        "raw await": raw_await,
        "asyncio.timeout block": timeout_block,
        "engine: sequential plan of 1,000 calls": engine_plan,
        "engine: sequential plan of 100 calls": engine_small_plan,
        "engine: run_call one at a time": engine_run_call,
        "pydantic-ai: marginal per call": peers.marginal_per_call(PEER_CALLS, pydantic_runs),
        "pydantic-ai: run of 100 calls, per call": amortized(pydantic_runs[0]),
        "langgraph ToolNode: marginal per call": peers.marginal_per_call(PEER_CALLS, graph_runs),
        "langgraph ToolNode: run of 100 calls, per call": amortized(graph_runs[0]),
    }
    for subject in subjects.values():  # warm-up: imports, caches, first-run costs
        await subject()
    samples = await rounds(subjects, 8 if harness.QUICK else 25, "µs/call (CPU)")
    await runner.aclose()
    section.add(samples)

    floor = samples["asyncio.timeout block"]
    engine = samples["engine: sequential plan of 1,000 calls"]
    vs_timeout = ratios(engine, floor)
    section.samples["engine / asyncio.timeout"] = vs_timeout
    section.samples["engine run_call / asyncio.timeout"] = ratios(
        samples["engine: run_call one at a time"], floor
    )
    section.checks.append(
        Check("1a per call vs asyncio.timeout", str(vs_timeout), "≤ 3x", vs_timeout.median <= 3.0)
    )
    best_marginal = min(
        ("pydantic-ai", samples["pydantic-ai: marginal per call"]),
        ("langgraph", samples["langgraph ToolNode: marginal per call"]),
        key=lambda item: item[1].median,
    )
    best_run = min(
        ("pydantic-ai", samples["pydantic-ai: run of 100 calls, per call"]),
        ("langgraph", samples["langgraph ToolNode: run of 100 calls, per call"]),
        key=lambda item: item[1].median,
    )
    strict = ratios(engine, best_marginal[1])
    like = ratios(samples["engine: sequential plan of 100 calls"], best_run[1])
    section.samples[f"engine / {best_marginal[0]} marginal"] = strict
    section.samples[f"engine (100-call plan) / {best_run[0]} (100-call run)"] = like
    section.checks.append(
        Check(
            f"1b per call vs best peer ({best_marginal[0]}, marginal cost per call)",
            str(strict),
            "≤ 0.1x",
            strict.median <= 0.1,
        )
    )
    section.checks.append(
        Check(
            f"1b per call vs best peer ({best_run[0]}, 100 calls per run, like for like)",
            str(like),
            "≤ 0.1x",
            like.median <= 0.1,
        )
    )
    celery = await celery_peer.measure(2 if harness.QUICK else 5)
    if isinstance(celery, str):
        section.notes.append(celery)
    else:
        section.samples["celery (Redis, solo worker): round trip per call"] = celery
        section.notes.append(
            "Celery is out of process (broker, worker, result backend), so it is shown "
            "for scale and left out of the in-process peer ratio"
        )
    return section
