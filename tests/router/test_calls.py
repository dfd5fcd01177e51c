"""What the router hands the engine: checked fingerprints, and nothing unchecked."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from app.engine.engine import Engine
from app.engine.memory import MemoryAuditSink, MemoryReceiptSink
from app.engine.receipt import Receipt
from app.engine.run import RunIdentity, RunState
from app.foundation.canonical import fingerprint
from app.router.loop import Finished, RouterRun
from tests.router import router_tools
from tests.router.harness import RouterHarness, request
from tests.router.registry import load_registry
from tests.support.fake_llm import openai_calls, openai_text

Handed = tuple[str, dict[str, Any], str | None]


def spy_on_run_call(monkeypatch: pytest.MonkeyPatch, engine: Engine) -> list[Handed]:
    """Every call the engine is asked to run: tool, arguments, `checked_fingerprint`."""
    handed: list[Handed] = []
    run_call = engine.run_call

    async def spy(
        state: RunState, tool_id: str, args: Mapping[str, Any], **options: Any
    ) -> Receipt:
        handed.append((tool_id, dict(args), options.get("checked_fingerprint")))
        return await run_call(state, tool_id, args, **options)

    monkeypatch.setattr(engine, "run_call", spy)
    return handed


async def test_a_checked_proposal_hands_its_fingerprint_so_the_engine_does_not_check_again(
    harness: RouterHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed = spy_on_run_call(monkeypatch, harness.engine)
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_text("done"),
        openai_text("answer"),
    )

    result = await harness.start(request())

    expected = fingerprint("lookup", {"term": "toolloop"})
    assert handed == [("lookup", {"term": "toolloop"}, expected)]
    (receipt,) = result.outcome.receipts
    assert (receipt["status"], receipt["fingerprint"]) == ("succeeded", expected)
    (admitted,) = harness.decisions.of("router.call_admitted")
    assert admitted["fingerprint"] == expected


@pytest.mark.parametrize(
    "arguments",
    [{"term": ""}, {"term": "x", "extra": 1}, {"nothing": True}, "not json", "[1, 2]"],
)
async def test_arguments_that_fail_the_check_never_reach_the_engine(
    harness: RouterHarness, monkeypatch: pytest.MonkeyPatch, arguments: Any
) -> None:
    handed = spy_on_run_call(monkeypatch, harness.engine)
    harness.model.script(
        openai_calls(("c1", "lookup", arguments)), openai_text("done"), openai_text("answer")
    )

    result = await harness.start(request())

    assert handed == []
    assert router_tools.CALLS == []
    assert result.outcome.receipts == []
    (rejected,) = harness.decisions.of("router.call_rejected")
    assert rejected["kind"] in ("invalid_arguments", "invalid_json")


async def test_a_deterministic_step_hands_the_fingerprint_of_its_admitted_arguments(
    harness: RouterHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed = spy_on_run_call(monkeypatch, harness.engine)
    harness.model.script(openai_text("enough"), openai_text("answer"))

    await harness.start(
        request(steps=[{"call_key": "s1", "tool": "lookup", "args": {"term": "receipt"}}])
    )

    assert handed == [("lookup", {"term": "receipt"}, fingerprint("lookup", {"term": "receipt"}))]


async def test_steps_of_a_plan_admitted_without_their_check_are_checked_by_the_engine(
    harness: RouterHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plan admitted for resuming skips the steps' check: the engine checks them itself.
    handed = spy_on_run_call(monkeypatch, harness.engine)
    harness.model.script(openai_text("enough"), openai_text("answer"))
    steps = [{"call_key": "s1", "tool": "lookup", "args": {"term": ""}}]
    plan = harness.plan(request(steps=steps), resuming=True)
    identity = RunIdentity(str(uuid4()), "agent", "tester", {}, harness.contract.hash)

    result = await RouterRun.new(harness.kit, plan, identity, harness.decisions).start()

    assert handed == [("lookup", {"term": ""}, None)]
    assert router_tools.CALLS == []
    (receipt,) = result.outcome.receipts
    assert (receipt["status"], receipt["error"]["kind"]) == ("failed", "input_schema")


async def test_a_tool_checked_against_another_contract_is_checked_again_by_the_engine(
    harness: RouterHarness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The run's plan holds tools of an equal contract loaded again, not the engine's own
    # objects: the router's check used another validator, so it hands no fingerprint.
    other = tmp_path / "other"
    other.mkdir()
    engine = Engine(load_registry(other), receipts=MemoryReceiptSink(), audit=MemoryAuditSink())
    harness.engine = engine
    handed = spy_on_run_call(monkeypatch, engine)
    harness.model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"})),
        openai_text("done"),
        openai_text("answer"),
    )

    try:
        result = await harness.start(request())
    finally:
        await engine.aclose()

    assert handed == [("lookup", {"term": "toolloop"}, None)]
    assert isinstance(result, Finished)
    (receipt,) = result.outcome.receipts
    assert receipt["fingerprint"] == fingerprint("lookup", {"term": "toolloop"})
