"""Failures of router use-cases; the router API maps each to a problem.

ServiceError
 ├── RouterUnavailable       503  prompts or profiles failed to load at startup
 ├── RouterRequestRejected   422  admission found problems; nothing ran
 ├── ConfirmationNotFound    404  no such run or confirmation (or not this caller's)
 └── ConfirmationConflict    409  already decided, run not waiting, or the contract changed
"""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.preflight import PlanProblem
from app.service.errors import ServiceError


class RouterUnavailable(ServiceError):
    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            "The router is unavailable (it failed closed at startup): " + "; ".join(self.problems)
        )


class RouterRequestRejected(ServiceError):
    def __init__(self, problems: Sequence[PlanProblem]) -> None:
        self.problems = list(problems)
        super().__init__(f"the router request has {len(self.problems)} problem(s)")


class ConfirmationNotFound(ServiceError):
    pass


class ConfirmationConflict(ServiceError):
    def __init__(self, detail: str, *, slug: str = "confirmation-conflict") -> None:
        self.slug = slug
        super().__init__(detail)
