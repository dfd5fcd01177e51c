"""The receipt: what happened to one call, as the caller sees it and as it is stored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from app.engine.storable import storable_text
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor


class Status(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    DENIED = "denied"  # a guardrail or a decider refused the call; it never ran


class ErrorKind(StrEnum):
    INPUT_SCHEMA = "input_schema"
    OUTPUT_SCHEMA = "output_schema"
    TIMEOUT = "timeout"
    EXCEPTION = "exception"
    DEADLINE = "deadline"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    GUARDRAIL = "guardrail"
    REQUIRES = "requires"  # the tool's `requires` did not hold when the call was to start
    CONFIRMATION = "confirmation"


class SettledCall(Protocol):
    """What `requires` counts of a settled call: a receipt, or its stored row."""

    @property
    def tool(self) -> str: ...

    @property
    def item_key(self) -> str | None: ...

    @property
    def status(self) -> str: ...


# Read once: `Status.SUCCEEDED` goes through the enum metaclass's attribute hooks.
_SUCCEEDED = Status.SUCCEEDED


@dataclass(frozen=True, slots=True)
class CallError:
    kind: ErrorKind
    message: str
    # The callable was interrupted while running; it may or may not have taken effect.
    outcome_unknown: bool = False

    def to_dict(self, message: str | None = None) -> dict[str, Any]:
        """As answered and stored: `message` (default: its own), escaped where no
        database could store it (an exception's text may hold anything)."""
        return {
            "kind": self.kind.value,
            "message": storable_text(self.message if message is None else message),
            "outcome_unknown": self.outcome_unknown,
        }


class Receipt(NamedTuple):
    """Immutable. A NamedTuple, not a frozen dataclass: one is built per call,
    and a frozen dataclass of this width costs several times more to build.

    `seq` orders a run's receipts (input order for plan calls); `redactor` is
    the tool's for this call's arguments (`Redactor.for_arguments`), used for
    the stored copy.
    """

    receipt_id: str
    run_id: str
    seq: int
    owner: str
    tool: str
    call_key: str
    item_key: str | None
    parallel_batch_id: str | None
    status: Status
    output: Any
    error: CallError | None
    attempts: int
    cache_hit: bool
    cache_source_receipt_id: str | None
    fingerprint: str
    definition_hash: str
    idempotency_key: str
    parent_receipt_id: str | None
    control: Mapping[str, Any] | None
    admission_wait_ms: float
    started_at: datetime
    finished_at: datetime
    duration_ms: float
    redactor: Redactor = DEFAULT_REDACTOR

    @property
    def succeeded(self) -> bool:
        return self.status is _SUCCEEDED

    def to_response(self) -> dict[str, Any]:
        """The caller's own copy: the real output and error message. Its times are
        the aware datetimes, which the response's JSON encoder (orjson) writes as
        `isoformat()` would, in C: the copy is encoded once, as it is sent."""
        return self._render(
            self.output,
            None if self.error is None else self.error.to_dict(),
            self.control,
            self.started_at,
            self.finished_at,
        )

    def to_stored(self) -> dict[str, Any]:
        """The redacted copy: what is stored and what evidence hooks receive."""
        output, error, control = self.redacted_parts()
        stored = self._render(
            output, error, control, self.started_at.isoformat(), self.finished_at.isoformat()
        )
        stored["run_id"] = self.run_id
        stored["seq"] = self.seq
        stored["owner"] = self.owner
        stored["definition_hash"] = self.definition_hash
        return stored

    def redacted_parts(self) -> tuple[Any, dict[str, Any] | None, Mapping[str, Any] | None]:
        """The stored copy's output, error and control: the only fields redaction changes."""
        output, _, error, control = self.redacted_parts_with_json()
        return output, error, control

    def redacted_parts_with_json(
        self,
    ) -> tuple[Any, bytes | None, dict[str, Any] | None, Mapping[str, Any] | None]:
        """`redacted_parts`, with the redacted output's JSON (orjson's) where redaction
        wrote it on the way (`Redactor.redact_with_json`), else None."""
        redactor = self.redactor
        error = self.error
        control = self.control
        output, written = redactor.redact_with_json(self.output)
        return (
            output,
            written,
            None if error is None else error.to_dict(redactor.redact_message(error.message)),
            None if control is None else redactor.redact(control),
        )

    def _render(
        self,
        output: Any,
        error: dict[str, Any] | None,
        control: Mapping[str, Any] | None,
        started_at: datetime | str,
        finished_at: datetime | str,
    ) -> dict[str, Any]:
        return {
            "receipt_id": self.receipt_id,
            "plan_id": self.run_id,
            "call_key": self.call_key,
            "item_key": self.item_key,
            "parallel_batch_id": self.parallel_batch_id,
            "tool": self.tool,
            "status": self.status.value,
            "output": output,
            "error": error,
            "attempts": self.attempts,
            "cache_hit": self.cache_hit,
            "cache_source_receipt_id": self.cache_source_receipt_id,
            "fingerprint": self.fingerprint,
            "idempotency_key": self.idempotency_key,
            "parent_receipt_id": self.parent_receipt_id,
            "control": None if control is None else dict(control),
            "admission_wait_ms": self.admission_wait_ms,
            "started_at": started_at,
            "finished_at": finished_at,
            "duration_ms": self.duration_ms,
        }
