"""Builds a contract from a YAML registry in tmp_path and an engine over in-memory ports."""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from app.contract import Contract, load_contract
from app.engine.engine import Engine
from app.engine.memory import MemoryAuditSink, MemoryCacheStore, MemoryReceiptSink
from app.engine.parallel import ParallelOutcome
from app.engine.plan import Lane, ParallelPlan, PlanLimits, PlannedCall, SequentialPlan
from app.engine.ports import AuditKind, ReceiptSink, SharedLimits
from app.engine.preflight import preflight_parallel, preflight_sequential
from app.engine.run import RunIdentity
from app.engine.sequential import SequentialOutcome
from tests.support.waiting import wait_for

OWNER = "worker"
OTHER = "other"
TOOLS_MODULE = "tests.engine.engine_tools"

Call = tuple[str, str, Mapping[str, Any]]  # (call_key, tool, args)


def tool(function: str, **options: Any) -> dict[str, Any]:
    declaration: dict[str, Any] = {
        "callable": f"{TOOLS_MODULE}:{function}",
        "description": f"Test tool {function}.",
        "input_schema": {},
        "output_schema": {},
        "cacheable": False,
    }
    declaration.update(options)
    return declaration


def write_contract(
    directory: Path,
    tools: Mapping[str, Mapping[str, Any]],
    *,
    other_tools: Mapping[str, Mapping[str, Any]] | None = None,
    hooks: Sequence[str] = (),
    allowed: Sequence[str] | None = None,
    name: str = "registry.yml",
) -> Contract:
    def owner(
        owned: Mapping[str, Mapping[str, Any]], allowed: Sequence[str] | None = None
    ) -> dict[str, Any]:
        return {
            "tools": {key: dict(value) for key, value in owned.items()},
            "runner_defaults": {
                "allowed_tools": list(owned if allowed is None else allowed),
                "max_calls": 100,
                "tool_timeout_s": 5,
            },
        }

    document: dict[str, Any] = {"subagents": {OWNER: owner(tools, allowed)}}
    if other_tools:
        document["subagents"][OTHER] = owner(other_tools)
    if hooks:
        document["hooks"] = {"evidence": [f"{TOOLS_MODULE}:{hook}" for hook in hooks]}
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_contract([path])


@dataclass
class Harness:
    contract: Contract
    engine: Engine
    receipts: Any  # MemoryReceiptSink unless a test brings its own sink
    audit: MemoryAuditSink
    cache: MemoryCacheStore

    def identity(
        self, *, caller: str | None = "tester", context: Mapping[str, Any] | None = None
    ) -> RunIdentity:
        return RunIdentity(
            run_id=str(uuid.uuid4()),
            owner=OWNER,
            caller=caller,
            context=context or {},
            contract_hash=self.contract.hash,
        )

    async def sequential(
        self,
        calls: Sequence[Call],
        *,
        deadline_s: float | None = None,
        run: RunIdentity | None = None,
    ) -> SequentialOutcome:
        run = run or self.identity()
        plan = SequentialPlan(
            owner=OWNER,
            calls=tuple(PlannedCall(key, name, args) for key, name, args in calls),
            context=run.context,
            deadline_s=deadline_s,
        )
        admitted = preflight_sequential(plan, self.contract, PlanLimits())
        assert admitted.ok, admitted.problems
        return await self.engine.run_sequential(run, plan, admitted.admitted)

    async def parallel(
        self,
        lanes: Sequence[tuple[str, Sequence[Call]]],
        *,
        max_concurrency: int,
        deadline_s: float | None = None,
        run: RunIdentity | None = None,
    ) -> ParallelOutcome:
        run = run or self.identity()
        plan = ParallelPlan(
            owner=OWNER,
            max_concurrency=max_concurrency,
            lanes=tuple(
                Lane(item_key, tuple(PlannedCall(key, name, args) for key, name, args in calls))
                for item_key, calls in lanes
            ),
            context=run.context,
            deadline_s=deadline_s,
        )
        admitted = preflight_parallel(plan, self.contract, PlanLimits())
        assert admitted.ok, admitted.problems
        return await self.engine.run_parallel(run, plan, admitted.admitted)

    def events(self, kind: AuditKind | None = None) -> list[Any]:
        return [event for event in self.audit.events if kind is None or event.kind is kind]


HarnessFactory = Callable[..., Harness]


def build_harness(
    contract: Contract,
    *,
    receipts: ReceiptSink | None = None,
    cache: MemoryCacheStore | None = None,
    clock: Callable[[], datetime] | None = None,
    rng: random.Random | None = None,
    worker_threads: int = 4,
    shared_limits: SharedLimits | None = None,
) -> Harness:
    store = cache if cache is not None else MemoryCacheStore()
    sink = receipts if receipts is not None else MemoryReceiptSink(store)
    audit = MemoryAuditSink()
    options: dict[str, Any] = {}
    if clock is not None:
        options["clock"] = clock
    if rng is not None:
        options["rng"] = rng
    engine = Engine(
        contract,
        receipts=sink,
        audit=audit,
        cache=store,
        worker_threads=worker_threads,
        shared_limits=shared_limits,
        **options,
    )
    return Harness(contract, engine, sink, audit, store)


until = functools.partial(wait_for, every_s=0)
