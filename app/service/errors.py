"""Failures a use-case reports to its caller; the API maps each to a problem.

ServiceError
 ├── PlanRejected         preflight found problems; nothing ran
 └── StorageUnavailable   the database could not take the run or its receipts
"""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.preflight import PlanProblem


class ServiceError(Exception):
    pass


class PlanRejected(ServiceError):
    def __init__(self, problems: Sequence[PlanProblem]) -> None:
        super().__init__(f"the plan has {len(problems)} problem(s)")
        self.problems = list(problems)


class StorageUnavailable(ServiceError):
    pass
