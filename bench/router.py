"""Target 6: the router's own cost per turn, the model excluded, against Pydantic AI's
agent loop per turn in the same rounds, and its growth with history.

Ours: a router run over the real engine (persistence excluded) whose model is a
plain function behind `httpx.MockTransport`: each turn asks for one no-op call
(alternating two tools, new arguments each turn), then a reply without calls
ends the turns and the final profile answers. The peer: a Pydantic AI `Agent`
whose `FunctionModel` asks, turn by turn, for one call of the same two no-op
tools (new arguments each turn), then answers with text. Runs of 20 and of 200
turns, all four in every round (the order rotates), CPU time of the process;
a ratio is taken per round, and the median of those is reported. Two readings
of each run:

- *engine's own* (the model round trip excluded; the figures judged): ours
  subtracts the CPU time inside `AsyncClient.build_request` and
  `AsyncClient.send` (header merging, cookie extraction, the mock transport
  reading the body, the model function, building the Response); what counts is
  prompt assembly, the LLM client's encoding, reading and decoding of the body,
  proposal checks, guardrails, the engine call, the observations, budgets and
  closeout. Pydantic AI's subtracts the CPU time inside `FunctionModel.request`
  (preparing the request, the model function, the response's bookkeeping); what
  counts is its agent graph, tool-call validation and execution, message
  history and usage accounting.
- *inclusive* (the model function alone excluded; reference only): httpx's
  request and response machinery counts for ours, `FunctionModel.request`'s own
  work for Pydantic AI.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from app.engine.run import RunIdentity
from app.llm.client import LLMClient
from app.llm.profiles import ModelProfile, Profiles
from app.router.limits import RouterLimits
from app.router.loop import Finished, RouterRun
from app.router.ports import RouterKit
from app.router.prompts import load_prompts
from app.router.request import RouterRequest
from app.router.request_checks import admit
from app.settings import PACKAGED_PROMPTS_DIR
from bench import harness, peers
from bench.stats import Check, Sample, Section, cpu_clock, ratios

COMMAND = "BENCH_ONLY=router .venv/bin/python -m bench"
PROMPTS = PACKAGED_PROMPTS_DIR
PROFILES = Profiles(
    {
        "router": ModelProfile("router", "openai", "http://llm.bench/v1", "router-model"),
        "final": ModelProfile("final", "openai", "http://llm.bench/v1", "final-model"),
    }
)
TOOLS = ("noop", "noop_cached")


def _reply(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "bench",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class _Model:
    """The scripted model; counts the CPU time spent inside it."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.asked = 0
        self.seconds = 0.0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        started = cpu_clock()
        turn = self.asked
        self.asked += 1
        if b'"final-model"' in request.content or turn > self.turns:
            reply = _reply({"role": "assistant", "content": "done"}, "stop")
        elif turn == self.turns:
            reply = _reply({"role": "assistant", "content": "no more calls"}, "stop")
        else:
            call = {
                "id": f"call-{turn}",
                "type": "function",
                "function": {
                    "name": TOOLS[turn % 2],
                    "arguments": json.dumps({"text": f"turn {turn}"}),
                },
            }
            reply = _reply(
                {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
            )
        response = httpx.Response(200, json=reply)
        self.seconds += cpu_clock() - started
        return response


class _TimedClient(httpx.AsyncClient):
    """An httpx client that counts the CPU time spent inside httpx's request path
    (building the request, and sending it up to the response's headers)."""

    seconds = 0.0

    def build_request(self, *args: Any, **kwargs: Any) -> httpx.Request:
        started = cpu_clock()
        try:
            return super().build_request(*args, **kwargs)
        finally:
            self.seconds += cpu_clock() - started

    async def send(self, *args: Any, **kwargs: Any) -> httpx.Response:
        started = cpu_clock()
        try:
            return await super().send(*args, **kwargs)
        finally:
            self.seconds += cpu_clock() - started


class _Decisions:
    def record(
        self, kind: str, detail: Any, *, tool: str | None = None, call_key: str | None = None
    ) -> None:
        return None


class _Ledger:
    async def record(self, entry: Any) -> None:
        return None


def per_turn(turns: int) -> Callable[[], Awaitable[tuple[float, float]]]:
    """One run, two readings in µs per turn: inclusive (the model function
    excluded), and the engine's own (the model round trip through httpx excluded)."""
    built = harness.contract()
    runner = harness.engine(built)
    prompts = load_prompts(PROMPTS)
    limits = RouterLimits(max_turns=turns + 2)
    request = RouterRequest(
        owner=harness.OWNER, goal="Echo texts.", router_profile="router", final_profile="final"
    )
    problems, plan = admit(request, built, PROFILES, limits)
    assert plan is not None, problems

    async def measure() -> tuple[float, float]:
        model = _Model(turns)
        async with _TimedClient(transport=httpx.MockTransport(model)) as http:
            kit = RouterKit.build(runner, LLMClient(http), prompts, limits, _Ledger())
            identity = RunIdentity(str(uuid.uuid4()), harness.OWNER, "bench", {}, built.hash)
            run = RouterRun.new(kit, plan, identity, _Decisions())
            started = cpu_clock()
            result = await run.start()
            elapsed = cpu_clock() - started
        assert isinstance(result, Finished), result
        assert result.outcome.status.value == "done", result.outcome
        assert model.asked >= turns, (model.asked, result.outcome)
        assert http.seconds >= model.seconds
        return (elapsed - model.seconds) / turns * 1e6, (elapsed - http.seconds) / turns * 1e6

    return measure


def peer_per_turn(turns: int) -> Callable[[], Awaitable[tuple[float, float]]]:
    """One Pydantic AI run, two readings in µs per turn: inclusive (the model function
    excluded), and the loop's own (the model round trip, `FunctionModel.request`,
    excluded)."""
    clock = peers.PeerModelClock()
    run = peers.pydantic_ai_turns(turns, TOOLS, clock)

    async def measure() -> tuple[float, float]:
        clock.round_trip = clock.function = 0.0
        started = cpu_clock()
        await run()
        elapsed = cpu_clock() - started
        assert clock.round_trip >= clock.function
        return (elapsed - clock.function) / turns * 1e6, (elapsed - clock.round_trip) / turns * 1e6

    return measure


LENGTHS = ("20", "200")
OURS, PEER = "router", "pydantic-ai"
OWN, INCLUSIVE = "own", "inclusive"
PEER_BOUND = 0.5  # ours / Pydantic AI, per turn, engine's own
GROWTH_BOUND = 1.2  # ours at 200 turns / at 20, per turn, engine's own


def subject(who: str, length: str, reading: str) -> str:
    """The name of one reading's sample, e.g. `router, 200 turns, own`."""
    return f"{who}, {length} turns, {reading}"


async def measure_rounds(
    runs: dict[tuple[str, str], Callable[[], Awaitable[tuple[float, float]]]], count: int
) -> dict[str, Sample]:
    """Every run once per round, the order rotating; each gives (inclusive, own)."""
    names = list(runs)
    samples = {
        subject(who, length, reading): Sample("µs/turn (CPU)")
        for who, length in names
        for reading in (OWN, INCLUSIVE)
    }
    for index in range(count):
        shift = index % len(names)
        for who, length in names[shift:] + names[:shift]:
            inclusive, own = await runs[who, length]()
            samples[subject(who, length, INCLUSIVE)].values.append(inclusive)
            samples[subject(who, length, OWN)].values.append(own)
    return samples


def judge(samples: dict[str, Sample]) -> tuple[dict[str, Sample], list[Check]]:
    """The per-round ratios (ours / Pydantic AI at each length, ours at 200 turns / at
    20) and the target checks on their medians; the inclusive ones for reference."""
    derived: dict[str, Sample] = {}
    checks: list[Check] = []
    for length in LENGTHS:
        against = ratios(samples[subject(OURS, length, OWN)], samples[subject(PEER, length, OWN)])
        derived[f"per turn, {length} turns: router / pydantic-ai (own)"] = against
        checks.append(
            Check(
                f"6 router per turn vs Pydantic AI's agent loop, {length} turns "
                "(own: model round trip excluded on both sides)",
                str(against),
                f"≤ {PEER_BOUND}x",
                against.median <= PEER_BOUND,
            )
        )
    growth = ratios(samples[subject(OURS, "200", OWN)], samples[subject(OURS, "20", OWN)])
    derived["per turn at 200 / at 20, router (own)"] = growth
    derived["per turn at 200 / at 20, pydantic-ai (own)"] = ratios(
        samples[subject(PEER, "200", OWN)], samples[subject(PEER, "20", OWN)]
    )
    checks.append(
        Check(
            "6 router per turn at 200 turns vs at 20 (own)",
            str(growth),
            f"≤ {GROWTH_BOUND}x",
            growth.median <= GROWTH_BOUND,
        )
    )
    # The inclusive readings count each side's model transport (httpx for ours,
    # `FunctionModel.request` for Pydantic AI): shown beside the targets, not judged.
    reference = "reference only: each side's model transport counted"
    inclusive = ratios(
        samples[subject(OURS, "200", INCLUSIVE)], samples[subject(PEER, "200", INCLUSIVE)]
    )
    derived["per turn, 200 turns: router / pydantic-ai (inclusive)"] = inclusive
    checks.append(
        Check(
            "6 router per turn vs Pydantic AI, 200 turns (inclusive: model function excluded)",
            str(inclusive),
            f"≤ {PEER_BOUND}x",
            None,
            reference,
        )
    )
    inclusive_growth = ratios(
        samples[subject(OURS, "200", INCLUSIVE)], samples[subject(OURS, "20", INCLUSIVE)]
    )
    derived["per turn at 200 / at 20, router (inclusive)"] = inclusive_growth
    checks.append(
        Check(
            "6 router per turn at 200 turns vs at 20 (inclusive)",
            str(inclusive_growth),
            f"≤ {GROWTH_BOUND}x",
            None,
            reference,
        )
    )
    return derived, checks


async def measure() -> Section:
    section = Section("Router cost per turn against Pydantic AI (target 6)", COMMAND)
    runs: dict[tuple[str, str], Callable[[], Awaitable[tuple[float, float]]]] = {}
    for length in LENGTHS:
        runs[OURS, length] = per_turn(int(length))
        runs[PEER, length] = peer_per_turn(int(length))
    for run in runs.values():
        await run()  # warm up
    samples = await measure_rounds(runs, 3 if harness.QUICK else 7)
    section.add(samples)
    derived, checks = judge(samples)
    section.add(derived)
    section.checks += checks
    return section
