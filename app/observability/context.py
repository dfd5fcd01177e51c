"""Who and what a log line is about: request id, run id and caller, bound per request.

The middleware binds one mutable `LogContext` per request; code further in
(the plan service, the router) fills in the run id. Mutating the shared object
rather than setting a new one lets tasks and threads started inside the request
see the same values, and the middleware read them back for its request line.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class LogContext:
    request_id: str | None = None
    run_id: str | None = None
    bound_caller: str | None = None
    # The request's scope state: the auth dependency leaves the principal there.
    request_state: Mapping[str, Any] | None = None

    @property
    def caller(self) -> str | None:
        if self.bound_caller is not None:
            return self.bound_caller
        principal = None if self.request_state is None else self.request_state.get("principal")
        name = getattr(principal, "name", None)
        return name if isinstance(name, str) else None


_current: ContextVar[LogContext | None] = ContextVar("toolloop_log_context", default=None)


def current_context() -> LogContext | None:
    return _current.get()


def enter_context(context: LogContext) -> Token[LogContext | None]:
    return _current.set(context)


def leave_context(token: Token[LogContext | None]) -> None:
    _current.reset(token)


def bind_run(run_id: str, caller: str | None = None) -> None:
    """Tag this request's (or this task's) log lines with the run, and its caller if known."""
    context = _current.get()
    if context is None:
        context = LogContext()
        _current.set(context)
    context.run_id = run_id
    if caller is not None:
        context.bound_caller = caller
