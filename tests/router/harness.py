"""A router over a real engine (in-memory ports) and a fake model behind MockTransport."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import uuid4

import httpx

from app.contract import Contract
from app.engine.engine import Engine
from app.engine.memory import MemoryAuditSink, MemoryReceiptSink
from app.engine.run import RunIdentity
from app.llm.client import LLMClient
from app.llm.prices import Prices
from app.llm.profiles import ModelProfile, Profiles
from app.router.limits import RouterLimits
from app.router.loop import Paused, RouterRun, RunResult
from app.router.pause import Decision
from app.router.ports import RouterKit, UsageEntry
from app.router.prompts import PromptSet, load_prompts
from app.router.request import Budgets, CompletionRequest, RouterRequest, Step
from app.router.request_checks import RunPlan, admit
from app.settings import PACKAGED_PROMPTS_DIR
from tests.support.fake_llm import FakeLLM

PROMPTS_DIR = PACKAGED_PROMPTS_DIR
ANTHROPIC_KEY = "sk-ant-test-key-0123456789"

PROFILES = Profiles(
    {
        "router": ModelProfile("router", "openai", "http://llm.test/v1", "router-model"),
        "final": ModelProfile("final", "openai", "http://llm.test/v1", "final-model"),
        "final-anthropic": ModelProfile(
            "final-anthropic",
            "anthropic",
            "https://anthropic.test",
            "claude-test",
            api_key_env="TEST_ANTHROPIC_KEY",
            max_tokens=300,
        ),
        # 2 and 10 nano-units a token: prices of 0.002 and 0.010 per million tokens.
        "router-priced": ModelProfile(
            "router-priced",
            "openai",
            "http://llm.test/v1",
            "router-model",
            prices=Prices(input_nanos=2, output_nanos=10),
        ),
        "final-priced": ModelProfile(
            "final-priced",
            "openai",
            "http://llm.test/v1",
            "final-model",
            prices=Prices(input_nanos=2, output_nanos=10),
        ),
    }
)


@dataclass
class Ledger:
    entries: list[UsageEntry] = field(default_factory=list)

    async def record(self, entry: UsageEntry) -> None:
        self.entries.append(entry)


@dataclass
class Decisions:
    events: list[tuple[str, dict[str, Any], str | None, str | None]] = field(default_factory=list)

    def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        tool: str | None = None,
        call_key: str | None = None,
    ) -> None:
        self.events.append((kind, dict(detail), tool, call_key))

    def kinds(self) -> list[str]:
        return [kind for kind, _, _, _ in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [detail for k, detail, _, _ in self.events if k == kind]


@dataclass
class RouterHarness:
    contract: Contract
    engine: Engine
    receipts: MemoryReceiptSink
    audit: MemoryAuditSink
    model: FakeLLM
    http: httpx.AsyncClient
    llm: LLMClient
    prompts: PromptSet
    limits: RouterLimits = field(default_factory=RouterLimits)
    decisions: Decisions = field(default_factory=Decisions)
    ledger: Ledger = field(default_factory=Ledger)
    sleeps: list[float] = field(default_factory=list)
    environ: dict[str, str] = field(default_factory=dict)  # the LLM client's environment
    runs: list[RouterRun] = field(default_factory=list)

    @property
    def kit(self) -> RouterKit:
        return RouterKit.build(self.engine, self.llm, self.prompts, self.limits, self.ledger)

    def limit(self, **changes: Any) -> None:
        self.limits = replace(self.limits, **changes)

    def plan(self, request: RouterRequest, *, resuming: bool = False) -> RunPlan:
        problems, plan = admit(request, self.contract, PROFILES, self.limits, resuming=resuming)
        assert plan is not None, problems
        return plan

    async def start(self, request: RouterRequest) -> RunResult:
        plan = self.plan(request)
        identity = RunIdentity(
            str(uuid4()), plan.owner.name, "tester", request.context, self.contract.hash
        )
        run = RouterRun.new(self.kit, plan, identity, self.decisions)
        self.runs.append(run)
        return await run.start()

    async def resume(self, paused: Paused, *decisions: tuple[int, bool, str]) -> RunResult:
        """Resume from the checkpoint alone, as another process would."""
        checkpoint = paused.checkpoint
        request = RouterRequest.from_json(checkpoint.request)
        plan = self.plan(request, resuming=True)
        identity = RunIdentity(
            paused.outcome.run_id, plan.owner.name, "tester", request.context, self.contract.hash
        )
        run = RouterRun.restore(self.kit, plan, identity, self.decisions, checkpoint)
        chosen = {}
        for index, approve, reason in decisions:
            call = paused.calls[index]
            chosen[call.confirmation_id] = Decision(
                call.confirmation_id, approve, reason, call.args
            )
        return await run.resume(chosen)

    def stored(self, run_id: str) -> list[dict[str, Any]]:
        return self.receipts.stored(run_id)


def request(**overrides: Any) -> RouterRequest:
    values: dict[str, Any] = {
        "owner": "agent",
        "goal": "Find out what toolloop is.",
        "router_profile": "router",
        "final_profile": "final",
        "context": {"trace_id": "t-1"},
    }
    values.update(overrides)
    if isinstance(values.get("budgets"), dict):
        values["budgets"] = Budgets(**values["budgets"])
    if isinstance(values.get("completion"), dict):
        values["completion"] = CompletionRequest(**values["completion"])
    if values.get("steps"):
        values["steps"] = tuple(Step(**step) for step in values["steps"])
    for key in ("allowed_tools", "guardrails"):
        if isinstance(values.get(key), list):
            values[key] = tuple(values[key])
    return RouterRequest(**values)


def load_test_prompts() -> PromptSet:
    return load_prompts(PROMPTS_DIR)
