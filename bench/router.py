"""Target 6: the router's own cost per turn, the model excluded, and its growth with history.

A router run over the real engine (persistence excluded) whose model is a
plain function behind `httpx.MockTransport`: each turn asks for one no-op call
(alternating two tools, new arguments each turn), then a reply without calls
ends the turns and the final profile answers. The time spent inside the
model function is subtracted; everything else (prompt assembly, the LLM
client's encoding and decoding, proposal checks, the engine call, the
observations) is the router's. Runs of 20 and of 200 turns are compared.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx

from app.engine.run import RunIdentity
from app.llm.client import LLMClient
from app.llm.profiles import ModelProfile, Profiles
from app.router.admission import admit
from app.router.limits import RouterLimits
from app.router.loop import Finished, RouterRun
from app.router.ports import RouterKit
from app.router.prompts import load_prompts
from app.router.request import RouterRequest
from bench import harness
from bench.stats import Check, Measure, Section, cpu_clock, ratios, rounds

COMMAND = "BENCH_ONLY=router .venv/bin/python -m bench"
PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
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


class _Decisions:
    def record(
        self, kind: str, detail: Any, *, tool: str | None = None, call_key: str | None = None
    ) -> None:
        return None


def per_turn(turns: int) -> Measure:
    built = harness.contract()
    runner = harness.engine(built)
    prompts = load_prompts(PROMPTS)
    limits = RouterLimits(max_turns=turns + 2)
    request = RouterRequest(
        owner=harness.OWNER, goal="Echo texts.", router_profile="router", final_profile="final"
    )
    problems, plan = admit(request, built, PROFILES, limits)
    assert plan is not None, problems

    async def measure() -> float:
        model = _Model(turns)
        async with httpx.AsyncClient(transport=httpx.MockTransport(model)) as http:
            kit = RouterKit.build(runner, LLMClient(http), prompts, limits)
            identity = RunIdentity(str(uuid.uuid4()), harness.OWNER, "bench", {}, built.hash)
            run = RouterRun.new(kit, plan, identity, _Decisions())
            started = cpu_clock()
            result = await run.start()
            elapsed = cpu_clock() - started
        assert isinstance(result, Finished), result
        assert result.outcome.status.value == "done", result.outcome
        assert model.asked >= turns, (model.asked, result.outcome)
        return (elapsed - model.seconds) / turns * 1e6

    return measure


async def measure() -> Section:
    section = Section("Router cost per turn (target 6)", COMMAND)
    short, long = per_turn(20), per_turn(200)
    await short()
    await long()
    samples = await rounds(
        {"20 turns": short, "200 turns": long}, 3 if harness.QUICK else 7, "µs/turn (CPU)"
    )
    section.samples["router, run of 20 turns, per turn (model excluded)"] = samples["20 turns"]
    section.samples["router, run of 200 turns, per turn (model excluded)"] = samples["200 turns"]
    growth = ratios(samples["200 turns"], samples["20 turns"])
    section.samples["per turn at 200 / at 20"] = growth
    worst = samples["200 turns"]
    section.checks.append(
        Check(
            "6 router cost per turn (model excluded)", str(worst), "≤ 100 µs", worst.median <= 100
        )
    )
    section.checks.append(
        Check("6 per turn at 200 turns vs at 20", str(growth), "≤ 1.2x", growth.median <= 1.2)
    )
    return section
