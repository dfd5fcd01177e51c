"""Server limits of router runs (settings, not App semantics); budgets may only narrow them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RouterLimits:
    max_turns: int = 16
    deadline_s: float = 600.0
    max_tokens: int | None = None
    max_completion_attempts: int = 5
    max_steps: int = 100
    max_goal_chars: int = 100_000
    max_observation_chars: int = 4000
    # Tolerated before the run stops: each bound is "how many may be fed back".
    max_malformed_outputs: int = 3
    max_duplicate_calls: int = 1
    max_budget_breaches: int = 1
    max_same_tool_streak: int = 8
    final_attempts: int = 2
    max_parallel_calls: int = 8
    policy_timeout_s: float = 10.0
