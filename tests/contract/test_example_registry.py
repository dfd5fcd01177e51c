from __future__ import annotations

from pathlib import Path

import demo_app.tools

from app.contract import Effect, load_contract

EXAMPLE = Path(__file__).resolve().parents[2] / "registries" / "example.yml"


def test_example_registry_is_valid() -> None:
    contract = load_contract([EXAMPLE], allowed_modules=["demo_app"])
    owner = contract.owners["text-worker"]
    assert {"normalize_text", "word_count", "slow_lookup", "summarize", "analyze_text"} <= set(
        owner.tools
    )
    assert set(owner.runner_defaults.allowed_tools) == set(owner.tools)
    assert contract.tools["slow_lookup"].target.is_async
    assert contract.tools["normalize_text"].effect is Effect.READ
    assert contract.tools["summarize"].control_envelope is not None
    assert set(contract.guardrails) == {"no_huge_texts", "short_texts_only"}
    assert contract.guardrails["short_texts_only"].shadow
    assert set(contract.verifiers) == {"lookup_succeeded"}
    assert [hook.ref for hook in contract.evidence_hooks] == ["demo_app.evidence:record"]


def test_example_outputs_satisfy_their_schemas() -> None:
    contract = load_contract([EXAMPLE])
    tools = contract.tools
    cases = {
        "normalize_text": ({"text": "  Hello\n  World "}, demo_app.tools.normalize_text),
        "word_count": ({"text": "one two three"}, demo_app.tools.word_count),
        "summarize": ({"text": "a b c"}, demo_app.tools.summarize),
    }
    for tool_id, (args, function) in cases.items():
        assert tools[tool_id].input_schema.is_valid(args)
        assert tools[tool_id].output_schema.problems(function(**args)) == []
