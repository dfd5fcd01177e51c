"""Typed views of ToolLoop's answers. Each keeps the JSON it came from in `raw`, so a
member this client does not know yet is still there."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class CallError:
    kind: str
    message: str

    @classmethod
    def from_wire(cls, data: Any) -> CallError | None:
        if not isinstance(data, dict):
            return None
        return cls(str(data.get("kind", "")), str(data.get("message", "")))


@dataclass(frozen=True)
class Receipt:
    """A receipt as a plan answers it, or as it is stored (`GET /runs/{id}/receipts`)."""

    receipt_id: str
    call_key: str
    item_key: str | None
    tool: str
    status: str
    output: Any
    error: CallError | None
    attempts: int
    cache_hit: bool
    fingerprint: str
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Receipt:
        return cls(
            receipt_id=data["receipt_id"],
            call_key=data["call_key"],
            item_key=data.get("item_key"),
            tool=data["tool"],
            status=data["status"],
            output=data.get("output"),
            error=CallError.from_wire(data.get("error")),
            attempts=int(data.get("attempts", 0)),
            cache_hit=bool(data.get("cache_hit", False)),
            fingerprint=data.get("fingerprint", ""),
            started_at=_time(data.get("started_at")),
            finished_at=_time(data.get("finished_at")),
            duration_ms=data.get("duration_ms"),
            raw=data,
        )


@dataclass(frozen=True)
class PendingCall:
    """A call waiting for a person's decision before it runs."""

    confirmation_id: str
    call_key: str
    item_key: str | None
    tool: str
    args_digest: str

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> PendingCall:
        return cls(
            data["confirmation_id"],
            data["call_key"],
            data.get("item_key"),
            data["tool"],
            data["args_digest"],
        )


@dataclass(frozen=True)
class LaneResult:
    item_key: str
    status: str
    receipts: tuple[Receipt, ...]


@dataclass(frozen=True)
class PlanResult:
    """The answer to a plan that ran (200): its status whatever its calls' outcomes."""

    plan_id: str
    kind: str
    status: str
    contract_hash: str
    receipts: tuple[Receipt, ...]
    lanes: tuple[LaneResult, ...]
    pending: tuple[PendingCall, ...]
    idempotency_key: str
    replayed: bool
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.plan_id

    def all_receipts(self) -> tuple[Receipt, ...]:
        """Every receipt in input order: the sequence's, or each lane's in lane order."""
        return self.receipts or tuple(r for lane in self.lanes for r in lane.receipts)

    @classmethod
    def from_wire(cls, data: dict[str, Any], idempotency_key: str, replayed: bool) -> PlanResult:
        lanes = tuple(
            LaneResult(
                lane["item_key"],
                lane["status"],
                tuple(Receipt.from_wire(r) for r in lane.get("receipts", ())),
            )
            for lane in data.get("lanes") or ()
        )
        return cls(
            plan_id=data["plan_id"],
            kind=data["kind"],
            status=data["status"],
            contract_hash=data.get("contract_hash", ""),
            receipts=tuple(Receipt.from_wire(r) for r in data.get("receipts") or ()),
            lanes=lanes,
            pending=tuple(PendingCall.from_wire(p) for p in data.get("pending") or ()),
            idempotency_key=idempotency_key,
            replayed=replayed,
            raw=data,
        )


@dataclass(frozen=True)
class RunAccepted:
    """The answer to `Prefer: respond-async` (202): the run goes on in the background."""

    run_id: str
    status: str
    location: str
    idempotency_key: str
    replayed: bool


@dataclass(frozen=True)
class RouterRunResult:
    run_id: str
    status: str
    stopped_by: str | None
    text: str | None
    final: Any
    receipts: tuple[Receipt, ...]
    pending: tuple[PendingCall, ...]
    idempotency_key: str
    replayed: bool
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_wire(
        cls, data: dict[str, Any], idempotency_key: str, replayed: bool
    ) -> RouterRunResult:
        return cls(
            run_id=data["run_id"],
            status=data["status"],
            stopped_by=data.get("stopped_by"),
            text=data.get("text"),
            final=data.get("final"),
            receipts=tuple(Receipt.from_wire(r) for r in data.get("receipts") or ()),
            pending=tuple(PendingCall.from_wire(p) for p in data.get("pending") or ()),
            idempotency_key=idempotency_key,
            replayed=replayed,
            raw=data,
        )


@dataclass(frozen=True)
class Run:
    """A run as `GET /runs` and `GET /runs/{id}` show it."""

    run_id: str
    kind: str
    owner: str
    status: str
    caller: str | None
    call_count: int
    created_at: datetime | None
    finished_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def ended(self) -> bool:
        return self.status not in ("running", "pending")

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Run:
        return cls(
            run_id=data["run_id"],
            kind=data["kind"],
            owner=data["owner"],
            status=data["status"],
            caller=data.get("caller"),
            call_count=int(data.get("call_count", 0)),
            created_at=_time(data.get("created_at")),
            finished_at=_time(data.get("finished_at")),
            raw=data,
        )


@dataclass(frozen=True)
class AuditEvent:
    id: int
    run_id: str | None
    at: datetime | None
    kind: str
    detail: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> AuditEvent:
        return cls(
            data["id"], data.get("run_id"), _time(data.get("at")), data["kind"],
            data.get("detail") or {}, data,
        )  # fmt: skip


@dataclass(frozen=True)
class Usage:
    """Model tokens and cost summed over one hour or day, owner, caller and profile;
    `cost` is exact (a Decimal), None when the profile declares no prices."""

    bucket: str
    start: datetime | None
    owner: str
    caller: str | None
    profile: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost: Decimal | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Usage:
        cost = data.get("cost")
        return cls(
            data["bucket"], _time(data.get("start")), data["owner"], data.get("caller"),
            data["profile"], data["requests"], data["input_tokens"], data["output_tokens"],
            None if cost is None else Decimal(cost), data,
        )  # fmt: skip


@dataclass(frozen=True)
class Confirmation:
    """A call that waits, or waited, for a person's decision."""

    confirmation_id: str
    run_id: str
    kind: str
    call_key: str
    item_key: str | None
    tool: str
    args_digest: str
    args: Any
    status: str
    requested_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Confirmation:
        return cls(
            confirmation_id=data["confirmation_id"],
            run_id=data["run_id"],
            kind=data.get("kind", ""),
            call_key=data["call_key"],
            item_key=data.get("item_key"),
            tool=data["tool"],
            args_digest=data["args_digest"],
            args=data.get("args"),
            status=data.get("status", "pending"),
            requested_at=_time(data.get("requested_at")),
            raw=data,
        )


@dataclass(frozen=True)
class RunEvent:
    """One event of `GET /runs/{id}/events`: a `receipt` as it became durable, or the
    `end` with the run's final status (heartbeats are not passed on)."""

    kind: str
    data: dict[str, Any]

    @property
    def receipt(self) -> Receipt | None:
        return Receipt.from_wire(self.data) if self.kind == "receipt" else None

    @property
    def status(self) -> str | None:
        return self.data.get("status") if self.kind == "end" else None
