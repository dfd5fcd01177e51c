"""Audit events for calls, built with the run's identity; details are redacted here."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.engine.ports import AuditEvent, AuditKind, AuditSink
from app.engine.receipt import CallError
from app.engine.redaction import redact_text
from app.engine.run import RunState


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


def error_detail(error: CallError | None) -> dict[str, Any] | None:
    """An error as audit detail, its message redacted."""
    return None if error is None else error.to_dict(redact_text(error.message))
