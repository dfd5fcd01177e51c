"""The README's router tour, the example registry changed on purpose, and a
recorded tour run, for the replay tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.fake_llm import openai_calls, openai_text

REGISTRIES = Path(__file__).resolve().parents[2] / "registries"
EXAMPLE = REGISTRIES / "example.yml"
EXAMPLE_PROFILES = REGISTRIES / "profiles.example.yml"
TOUR_CASSETTE = REGISTRIES / "tour.cassette.jsonl"

# The README's router request.
TOUR: dict[str, Any] = {
    "owner": "text-worker",
    "goal": "Define ToolLoop using the glossary.",
    "router_profile": "router-small",
    "final_profile": "final-local",
    "budgets": {"max_calls": 4, "max_turns": 6, "deadline_s": 60},
    "steps": [{"call_key": "s1", "tool": "normalize_text", "args": {"text": "  Tool  Loop "}}],
    "allowed_tools": ["normalize_text", "slow_lookup"],
    "guardrails": ["no_huge_texts"],
    "completion": {"verify": "lookup_succeeded", "max_attempts": 2},
}

# What the model said in the tour: a lookup, enough, the answer.
TOUR_REPLIES = (
    openai_calls(("call_1", "slow_lookup", {"term": "toolloop"})),
    openai_text("The glossary defines it."),
    openai_text("ToolLoop is a governed execution service for registered tools."),
)

# The example's guardrail, now refusing every call.
STRICTER_GUARDRAIL = (
    "callable: demo_app.policy:no_huge_texts",
    "callable: tests.router.replay_policies:refuse_everything",
)
# slow_lookup's term, now too short for "toolloop".
NARROWER_SCHEMA = (
    "term: {type: string, minLength: 1, maxLength: 200,",
    "term: {type: string, minLength: 1, maxLength: 3,",
)


def tour_replay(profile: str, **changes: Any) -> dict[str, Any]:
    return {**TOUR, "router_profile": profile, "final_profile": profile, **changes}


def changed_example(directory: Path, *changes: tuple[str, str]) -> Path:
    text = EXAMPLE.read_text()
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    path = directory / "changed-example.yml"
    path.write_text(text)
    return path


def replay_profiles(path: Path, base: str, **sources: dict[str, str]) -> Path:
    """`base` profiles YAML plus a replay profile per keyword, each
    {"cassette": PATH} or {"run_id": ID}."""
    lines = [base.rstrip("\n")]
    for name, source in sources.items():
        lines.append(f"  {name}:\n    provider: replay")
        lines.extend(f"    {key}: {value}" for key, value in source.items())
    path.write_text("\n".join(lines) + "\n")
    return path


def differences_of(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(d["kind"], d["call_key"]) for d in body["replay"]["differences"]]
