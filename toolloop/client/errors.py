"""What a call to ToolLoop can raise.

ToolLoopError
 ├── ProblemError            the service answered with a problem (4xx/5xx, RFC 9457)
 │    ├── UnansweredRequest  409: this Idempotency-Key's first request never got its
 │    │                      answer (its process stopped); read or resume `run_id`
 │    └── RetriesExhausted   503/429 still, after every retry the policy allows
 ├── Unreachable             no connection could be made, after every retry the
 │                           policy allows; nothing was sent
 └── ConnectionLost          the request was sent, the answer never came; the
                             request may have run: repeat it with `idempotency_key`
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FieldProblem:
    pointer: str
    message: str


@dataclass(frozen=True)
class Problem:
    """An `application/problem+json` body; `body` keeps every member as sent."""

    status: int
    type: str
    title: str
    detail: str
    errors: tuple[FieldProblem, ...] = ()
    body: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_wire(cls, status: int, body: Any) -> Problem:
        if not isinstance(body, dict):
            return cls(status, "about:blank", f"HTTP {status}", str(body)[:500])
        errors = tuple(
            FieldProblem(str(e.get("pointer", "")), str(e.get("message", "")))
            for e in body.get("errors") or ()
            if isinstance(e, dict)
        )
        return cls(
            status=int(body.get("status", status)),
            type=str(body.get("type", "about:blank")),
            title=str(body.get("title", f"HTTP {status}")),
            detail=str(body.get("detail", "")),
            errors=errors,
            body=body,
        )

    @property
    def slug(self) -> str:
        """The last segment of `type`: `idempotency-key-unanswered`, `plan-rejected`, ..."""
        return self.type.replace(":", "/").rstrip("/").rsplit("/", 1)[-1]


class ToolLoopError(Exception):
    """Anything this client raises on purpose."""


class ProblemError(ToolLoopError):
    def __init__(self, problem: Problem, *, idempotency_key: str | None = None) -> None:
        self.problem = problem
        self.idempotency_key = idempotency_key
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}")

    @property
    def status(self) -> int:
        return self.problem.status


class UnansweredRequest(ProblemError):
    """The first request under this key was accepted and then lost with its process."""

    @property
    def run_id(self) -> str | None:
        run_id = self.problem.body.get("run_id")
        return run_id if isinstance(run_id, str) else None


class RetriesExhausted(ProblemError):
    """The service kept answering 503 or 429 for as long as the retry policy allows."""


class ConnectionLost(ToolLoopError):
    """The request went out and no answer came back: it may or may not have run.
    Sending it again with the same `idempotency_key` never runs it twice."""

    def __init__(self, message: str, *, idempotency_key: str | None) -> None:
        self.idempotency_key = idempotency_key
        super().__init__(message)


class Unreachable(ToolLoopError):
    """No connection to the service could be made; the request never went out."""
