"""The typed, immutable plans the engine runs after preflight admits them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class PlannedCall(NamedTuple):
    """One call; exactly one of `args` (exact) or `payload` (to project) is given.

    Immutable. A NamedTuple, not a frozen dataclass: one is built per call of every
    plan request, in a quarter of the time."""

    call_key: str
    tool: str
    args: Mapping[str, Any] | None = None
    payload: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SequentialPlan:
    owner: str
    calls: tuple[PlannedCall, ...]
    context: Mapping[str, Any] = field(default_factory=dict)
    deadline_s: float | None = None


@dataclass(frozen=True, slots=True)
class Lane:
    item_key: str
    calls: tuple[PlannedCall, ...]


@dataclass(frozen=True, slots=True)
class ParallelPlan:
    owner: str
    max_concurrency: int
    lanes: tuple[Lane, ...]
    context: Mapping[str, Any] = field(default_factory=dict)
    deadline_s: float | None = None


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """Server-setting limits (DESIGN section 4); the values are operator knobs."""

    max_sequential_calls: int = 1000
    max_lanes: int = 10000
    max_calls_per_lane: int = 100
    max_concurrency_cap: int = 1000
