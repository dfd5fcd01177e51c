"""Audit events for calls, built with the run's identity.

Details are not redacted here: every audit row is, once, where the writer turns
events into rows (`app.store.journal.events`), whoever emitted it. Only what
that step cannot know is done here: a call's error message loses the values of
the call's redacted arguments (`Redactor.hide_arguments`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.engine.ports import AuditEvent, AuditKind, AuditSink
from app.engine.receipt import CallError
from app.engine.run import RunState
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor


class Auditor:
    __slots__ = ("emit",)

    def __init__(self, sink: AuditSink) -> None:
        self.emit = sink.emit

    def call_event(
        self,
        kind: AuditKind,
        at: datetime,
        state: RunState,
        tool: str,
        call_key: str,
        item_key: str | None,
        detail: Mapping[str, Any],
    ) -> None:
        identity = state.identity
        self.emit(
            AuditEvent(kind, at, identity.run_id, identity.caller, tool, call_key, item_key, detail)
        )


def error_detail(
    error: CallError | None, redactor: Redactor = DEFAULT_REDACTOR
) -> dict[str, Any] | None:
    """An error as audit detail, without the values of the call's redacted arguments."""
    return None if error is None else error.to_dict(redactor.hide_arguments(error.message))
