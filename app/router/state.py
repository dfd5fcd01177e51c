"""The generic runtime state of a router run, and nothing more.

Counts, fingerprints, the same-tool streak, observation summaries, token,
latency and deadline accounting, and the final/abort status. Nothing here
reads an argument or result field: receipts are counted by tool, status and
error kind only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.foundation.money import shown

_ERROR_COUNTS = {
    "input_schema": "schema_errors",
    "output_schema": "schema_errors",
    "timeout": "timeouts",
    "deadline": "timeouts",
    "exception": "execution_errors",
    "cancelled": "execution_errors",
    "interrupted": "execution_errors",
    "guardrail": "guardrail_denials",
}
_NUMBERS = (int, float)
COUNTS = (
    "schema_errors",
    "timeouts",
    "execution_errors",
    "guardrail_denials",
    "malformed_outputs",
    "duplicate_calls",
    "budget_breaches",
)


class RouterState:
    __slots__ = (
        "attempts",
        "calls",
        "cost_nanos",
        "counts",
        "deadline_s",
        "elapsed_s",
        "error",
        "final_calls",
        "fingerprint_set",
        "fingerprints",
        "input_tokens",
        "malformed",
        "model_calls",
        "model_latency_ms",
        "observations",
        "output_tokens",
        "records",
        "status",
        "streak",
        "streak_tool",
        "tool_latency_ms",
        "tools",
        "turns",
    )

    def __init__(self, deadline_s: float) -> None:
        self.turns = 0
        self.attempts = 0
        self.final_calls = 0
        self.calls = 0
        self.tools: dict[str, dict[str, Any]] = {}
        self.fingerprints: list[str] = []
        self.fingerprint_set: set[str] = set()
        self.streak_tool: str | None = None
        self.streak = 0
        self.observations: list[dict[str, Any]] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.model_calls = 0
        # Nano-units (`app.foundation.money`) of the requests whose profile has prices;
        # None until one had.
        self.cost_nanos: int | None = None
        self.model_latency_ms = 0.0
        self.tool_latency_ms = 0.0
        self.deadline_s = deadline_s
        self.elapsed_s = 0.0
        self.counts: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self.malformed: dict[str, int] = {}
        self.status = "running"
        self.error: str | None = None
        # The run's receipts, redacted, in the order they settled (not in the public state).
        self.records: list[dict[str, Any]] = []

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def seen(self, fingerprint: str) -> bool:
        return fingerprint in self.fingerprint_set

    def remember(self, fingerprint: str) -> None:
        """Keep the fingerprint of a call that was admitted or denied (for duplicates)."""
        self.fingerprints.append(fingerprint)
        self.fingerprint_set.add(fingerprint)

    def succeeded(self, tool: str) -> int:
        entry = self.tools.get(tool)
        return 0 if entry is None else int(entry["results"].get("succeeded", 0))

    def calls_of(self, tool: str) -> int:
        entry = self.tools.get(tool)
        return 0 if entry is None else int(entry["calls"])

    def next_streak(self, tool: str) -> int:
        return self.streak + 1 if tool == self.streak_tool else 1

    def advance_streak(self, tool: str, streak: int | None = None) -> None:
        """Count one more call of `tool`; `streak` is `next_streak(tool)`, if known."""
        self.streak = self.next_streak(tool) if streak is None else streak
        self.streak_tool = tool

    def count(self, name: str, by: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + by

    def count_malformed(self, kind: str) -> None:
        self.malformed[kind] = self.malformed.get(kind, 0) + 1
        self.count("malformed_outputs")

    def add_usage(
        self, input_tokens: int, output_tokens: int, latency_ms: float, cost_nanos: int | None
    ) -> None:
        self.model_calls += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if cost_nanos is not None:
            self.cost_nanos = (self.cost_nanos or 0) + cost_nanos
        self.model_latency_ms = round(self.model_latency_ms + latency_ms, 3)

    def add_unseen_usage(
        self, requests: int, input_tokens: int, output_tokens: int, cost_nanos: int | None
    ) -> None:
        """Count the part of a run's usage, all told (`requests` model requests in all),
        that this state has not counted: requests made by an attempt that was lost."""
        unseen = requests - self.model_calls
        if unseen <= 0:
            return
        self.model_calls = requests
        self.input_tokens = max(self.input_tokens, input_tokens)
        self.output_tokens = max(self.output_tokens, output_tokens)
        if cost_nanos is not None and cost_nanos > (self.cost_nanos or 0):
            self.cost_nanos = cost_nanos

    def add_receipt(self, stored: dict[str, Any], observation: dict[str, Any] | None) -> None:
        """Count one settled receipt (redacted copy); `observation` is what the model saw.

        Both dicts are kept as given, not copied: pass fresh ones, and leave them be.
        """
        tool = stored["tool"]
        status = stored["status"]
        entry = self.tools.get(tool)
        if entry is None:
            entry = self.tools[tool] = {"calls": 0, "results": {}}
        if status != "denied":
            entry["calls"] += 1
            if stored.get("parent_receipt_id") is None:
                self.calls += 1
        results = entry["results"]
        results[status] = results.get(status, 0) + 1
        error = stored.get("error")
        if error is not None:
            counter = _ERROR_COUNTS.get(str(error.get("kind")))
            if counter is not None:
                self.count(counter)
        duration = stored.get("duration_ms")
        if isinstance(duration, _NUMBERS):
            self.tool_latency_ms = round(self.tool_latency_ms + duration, 3)
        self.records.append(stored)
        if observation is not None:
            self.observations.append(observation)

    def to_public(self) -> dict[str, Any]:
        """The `state` of the outcome."""
        return {
            "status": self.status,
            "calls": self.calls,
            "tools": {name: _copy_entry(entry) for name, entry in sorted(self.tools.items())},
            "fingerprints": list(self.fingerprints),
            "same_tool_streak": {"tool": self.streak_tool, "count": self.streak},
            "observations": [dict(o) for o in self.observations],
            "tokens": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "total": self.tokens,
            },
            "cost": None if self.cost_nanos is None else shown(self.cost_nanos),
            "model_calls": self.model_calls,
            "final_calls": self.final_calls,
            "latency_ms": {"model": self.model_latency_ms, "tools": self.tool_latency_ms},
            "deadline": {"deadline_s": self.deadline_s, "elapsed_s": round(self.elapsed_s, 3)},
            "counts": dict(self.counts),
            "malformed": dict(sorted(self.malformed.items())),
            "error": self.error,
        }

    def dump(self) -> dict[str, Any]:
        """Everything, for a checkpoint."""
        return {
            **self.to_public(),
            "turns": self.turns,
            "attempts": self.attempts,
            "cost_nanos": self.cost_nanos,
            "records": [dict(r) for r in self.records],
        }

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> RouterState:
        state = cls(float(data["deadline"]["deadline_s"]))
        state.status = data["status"]
        state.turns = data["turns"]
        state.attempts = data["attempts"]
        state.final_calls = data["final_calls"]
        state.calls = data["calls"]
        state.tools = {name: _copy_entry(entry) for name, entry in data["tools"].items()}
        state.fingerprints = list(data["fingerprints"])
        state.fingerprint_set = set(state.fingerprints)
        state.streak_tool = data["same_tool_streak"]["tool"]
        state.streak = data["same_tool_streak"]["count"]
        state.observations = [dict(o) for o in data["observations"]]
        state.input_tokens = data["tokens"]["input"]
        state.output_tokens = data["tokens"]["output"]
        state.model_calls = data["model_calls"]
        state.cost_nanos = data.get("cost_nanos")
        state.model_latency_ms = data["latency_ms"]["model"]
        state.tool_latency_ms = data["latency_ms"]["tools"]
        state.elapsed_s = float(data["deadline"]["elapsed_s"])
        state.counts = dict.fromkeys(COUNTS, 0) | dict(data["counts"])
        state.malformed = dict(data["malformed"])
        state.error = data["error"]
        state.records = [dict(r) for r in data["records"]]
        return state


def _copy_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {"calls": entry["calls"], "results": dict(sorted(entry["results"].items()))}
