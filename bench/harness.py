"""The engine under test, built from the benchmark registry, and plans for it."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.contract import Contract, load_contract
from app.engine.engine import Engine
from app.engine.parallel import ParallelOutcome
from app.engine.plan import Lane, ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.ports import (
    AuditEvent,
    AuditSink,
    CachedOutput,
    CacheStore,
    ReceiptSink,
    SharedLimits,
)
from app.engine.preflight import preflight_parallel, preflight_sequential
from app.engine.receipt import Receipt
from app.engine.run import RunIdentity
from app.engine.sequential import SequentialOutcome

REGISTRY = Path(__file__).with_name("registry.yml")
OWNER = "bench"
ARGS: Mapping[str, Any] = {"text": "hello"}
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")
# Plans far beyond the service's default limits (target 7 runs 100,000 lanes).
LIMITS = PlanLimits(
    max_sequential_calls=1_000_000, max_lanes=1_000_000, max_concurrency_cap=100_000
)


def contract() -> Contract:
    return load_contract([REGISTRY])


class NullSinks:
    """The receipt and audit sinks with persistence taken out: each receipt's
    stored copy is still redacted, and, as the group-commit writer does, every
    1,000 receipts share one future, resolved at once.

    A sink serves one event loop. It asks for the running loop only when it makes
    a future, as the writer does: `asyncio.get_running_loop()` costs a system
    call on CPython 3.11, which a check per receipt would charge to the
    engine's figure."""

    def __init__(self) -> None:
        self.receipts = 0
        self.events = 0
        self._done: asyncio.Future[None] | None = None

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        receipt.redacted_parts()
        self.receipts += 1
        done = self._done
        if done is None or self.receipts % 1000 == 0:
            done = self._done = asyncio.get_running_loop().create_future()
            done.set_result(None)
        return done

    def emit(self, event: AuditEvent) -> None:
        self.events += 1


def engine(
    built: Contract,
    sink: ReceiptSink | None = None,
    cache: CacheStore | None = None,
    audit: AuditSink | None = None,
    shared_limits: SharedLimits | None = None,
) -> Engine:
    null = NullSinks()
    return Engine(
        built,
        receipts=sink if sink is not None else null,
        audit=audit if audit is not None else null,
        cache=cache,
        shared_limits=shared_limits,
    )


def identity(built: Contract) -> RunIdentity:
    return RunIdentity(str(uuid.uuid4()), OWNER, "bench", {}, built.hash)


def sequential_plan(
    built: Contract, tool: str, calls: int, args: Sequence[Mapping[str, Any]] | None = None
) -> tuple[SequentialPlan, Sequence[Mapping[str, Any]]]:
    plan = SequentialPlan(
        OWNER,
        tuple(
            PlannedCall(str(index), tool, ARGS if args is None else args[index])
            for index in range(calls)
        ),
    )
    checked = preflight_sequential(plan, built, LIMITS)
    assert checked.ok, checked.problems
    return plan, checked.admitted


def parallel_plan(
    built: Contract, tool: str, lanes: int, max_concurrency: int
) -> tuple[ParallelPlan, Sequence[Sequence[Mapping[str, Any]]]]:
    plan = ParallelPlan(
        OWNER,
        max_concurrency,
        tuple(Lane(str(index), (PlannedCall("1", tool, ARGS),)) for index in range(lanes)),
    )
    checked = preflight_parallel(plan, built, LIMITS)
    assert checked.ok, checked.problems
    return plan, checked.admitted


async def run_sequential(
    runner: Engine,
    built: Contract,
    plan: SequentialPlan,
    admitted: Sequence[Mapping[str, Any]],
) -> SequentialOutcome:
    outcome = await runner.run_sequential(identity(built), plan, admitted)
    assert outcome.status == "succeeded", outcome.receipts[0]
    return outcome


async def run_parallel(
    runner: Engine,
    built: Contract,
    plan: ParallelPlan,
    admitted: Sequence[Sequence[Mapping[str, Any]]],
) -> ParallelOutcome:
    outcome = await runner.run_parallel(identity(built), plan, admitted)
    assert outcome.status == "succeeded"
    return outcome
