"""Plan metrics: outcomes by kind, and preflight rejections by problem category."""

from __future__ import annotations

from collections.abc import Iterable

from app.engine.preflight import PlanProblem
from app.observability.labels import Children, Vocabulary
from app.observability.metrics import PLANS, PREFLIGHT_REJECTIONS

PLAN_KINDS = Vocabulary(("sequential", "parallel", "mcp"))
PLAN_STATUSES = Vocabulary(("succeeded", "failed", "cancelled", "interrupted"))
_PLANS = Children(PLANS)


def record_plan_rejected(kind: str, problems: Iterable[PlanProblem]) -> None:
    label = PLAN_KINDS(kind)
    PLANS.labels(label, "rejected").inc()
    for reason in sorted({problem.code.value for problem in problems}):
        PREFLIGHT_REJECTIONS.labels(label, reason).inc()


def record_plan_finished(kind: str, status: str) -> None:
    """`status` is the run's final status."""
    _PLANS(PLAN_KINDS(kind), PLAN_STATUSES(status)).inc()
