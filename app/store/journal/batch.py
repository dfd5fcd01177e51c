"""A batch: the rows of one transaction, as the group commit took them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from app.engine.ports import AuditEvent
from app.store.journal.chain_work import ChainWork
from app.store.journal.rows import RenderedTimes

Row = Mapping[str, Any]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Batch:
    """What one transaction writes, in this order: idempotency keys claimed with the
    runs they start, runs started, receipts, audit rows, runs' ends, keys'
    final responses, keys freed.

    - `claims`: (key row, run row); the run is inserted only if its key is new or
      expired, and a key appears once.
    - `receipts`: receipt rows (`Receipt` column names); `encoded`: receipts as the
      backend's driver tuples (`Backend.receipt_values`), all but `created_at`,
      which they share.
    - `replaced`: receipt rows that replace the stored receipt of their run and
      `seq`; `cache`: cache entries. A batch with either goes through a session.
    - `audit`: the engine's events and the service's own audit rows;
      `replaced_audit`: the audit rows recording the receipts `replaced` replaces,
      each its own row, after the others; `audit_rows`: audit rows as stored, linked
      (`app.store.journal.chain` turns `audit` and `replaced_audit` into them).
    - `ends`: `run_id`, `status`, `outcome`, `call_count` (None keeps the stored
      count), `finished_at`.
    - `rendered`: SQLite's datetimes already rendered for `encoded`.
    - `alone`: the batch ends the only run open.
    - `ended`: the runs whose end the batch writes (merged into their inserts or not).
    - `chain`: how the batch is linked (`app.store.journal.chain`).
    """

    claims: Sequence[tuple[Row, Row]] = ()
    runs: Sequence[Row] = ()
    receipts: Sequence[Row] = ()
    encoded: Sequence[tuple[Any, ...]] = ()
    replaced: Sequence[Row] = ()
    cache: Sequence[Row] = ()
    audit: Sequence[AuditEvent | dict[str, Any]] = ()
    replaced_audit: Sequence[Row] = ()
    audit_rows: Sequence[Row] = ()
    ends: Sequence[Row] = ()
    completions: Sequence[Row] = ()
    releases: Sequence[Row] = ()
    created_at: datetime = field(default_factory=_now)
    rendered: RenderedTimes = field(default_factory=dict, compare=False)
    alone: bool = False
    ended: tuple[str, ...] = ()
    chain: ChainWork | None = field(default=None, compare=False)

    @property
    def through_session(self) -> bool:
        """Whether the batch replaces stored receipts, writes cache entries or is
        linked in its transaction, which go through the repositories in a session."""
        return bool(
            self.replaced or self.cache or (self.chain is not None and self.chain.in_transaction)
        )

    @property
    def receipt_count(self) -> int:
        return len(self.receipts) + len(self.encoded) + len(self.replaced)

    def first_receipt_id(self) -> str | None:
        if self.receipts:
            return str(self.receipts[0]["id"])
        if self.encoded:
            return str(self.encoded[0][0])
        if self.replaced:
            return str(self.replaced[0]["id"])
        return None

    def head(self) -> Batch:
        """The claims, runs and receipts to insert."""
        return replace(
            self,
            replaced=(),
            cache=(),
            audit=(),
            replaced_audit=(),
            audit_rows=(),
            ends=(),
            completions=(),
            releases=(),
        )

    def tail(self) -> Batch:
        """The audit rows, ends, keys' responses and keys freed."""
        return replace(self, claims=(), runs=(), receipts=(), encoded=(), replaced=(), cache=())
