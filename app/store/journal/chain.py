"""The hash chain written with the journal's rows (`app.foundation.chain`).

Each batch's receipts and audit rows are linked before they are written, in the
order of the transaction: receipts inserted, receipts replacing stored ones,
audit rows (the engine's events as the rows they are stored as), the audit rows
of the replacements. A row's chain is its run's, or its UTC day's for an audit
row without a run.

The writer (`ChainKeeper`) keeps the head (length, last link) of every run it
wrote and that has not ended; a run it does not know (resumed, continued after
its end, started elsewhere) has its head read once before its batch
(`read_heads`). Such a batch is linked on the event loop and written by
whichever path the backend takes. A run is written by one process at a time
(the one running it), and its head is forgotten once its end commits, so that a
run continued by another process later is read again.

A batch with audit rows without a run, or writing a checkpoint, goes through a
session instead (`link_in_session`): several processes may extend a day's chain
or the checkpoints, so their heads are read in the transaction, under a lock
on PostgreSQL (SQLite has one writer at a time).

Heads are taken in only once their batch committed: a batch that fails leaves
them as they were, and one retried through an outage is written with the links
it was given (in a session, read again).

Checkpoints (`CheckpointDue`): in the transaction that ends runs, once
`checkpoint_runs` runs ended since the last one or the UTC day changed, and a
last one when the writer closes, each chaining the heads of the runs ended
since the previous one; signed when a key is configured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.engine.ports import AuditEvent
from app.foundation.canonical import sorted_json
from app.foundation.chain import (
    AUDIT_EVENTS,
    DAY_CHAIN_PREFIX,
    RECEIPTS,
    RunHead,
    chain_id_of,
    entry_content,
    entry_digest,
    genesis,
    link,
    rfc3339,
)
from app.foundation.serialization import dumps, loads
from app.foundation.signing import CheckpointSigner
from app.store.journal.batch import Batch
from app.store.journal.chain_work import ChainWork, CheckpointDue, Head
from app.store.journal.events import stored_audit_rows
from app.store.journal.rows import RECEIPT_COLUMNS, complete, layout_of
from app.store.models import AuditEvent as AuditEventRow
from app.store.models import Receipt
from app.store.repositories.chain_heads import ChainHeadRepository
from app.store.types import utc_now

# Runs whose heads the writer keeps at most (runs that never ended are dropped
# oldest first, and read again if they write more).
MAX_HEADS = 100_000

_RUN_ID = RECEIPT_COLUMNS.index("run_id")
_CHAIN_SEQ = RECEIPT_COLUMNS.index("chain_seq")
# The content columns of a receipt's driver tuple (all but the chain's and created_at).
_RECEIPT_NAMES = RECEIPT_COLUMNS[:_CHAIN_SEQ]
_RECEIPT_JSON = frozenset(("output", "error", "control"))
_RECEIPT_TIMES = frozenset(("started_at", "finished_at"))
_RECEIPT_FLOATS = frozenset(("admission_wait_ms", "duration_ms"))
_JSON_COLUMNS = {RECEIPTS: _RECEIPT_JSON, AUDIT_EVENTS: frozenset(("detail",))}


def _time_text(value: Any) -> Any:
    """A datetime column's value as `rfc3339` writes it: from a datetime, or from
    SQLite's stored text ("YYYY-MM-DD HH:MM:SS.ffffff", always with microseconds)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.replace(" ", "T", 1) + "Z"
    return rfc3339(value)


def encoded_receipt_digest(values: Sequence[Any], created_at: str) -> str:
    """A receipt's digest from its driver tuple (`records.receipt_values`): JSON
    documents as their values, datetimes as `entry_content` writes them."""
    document: dict[str, Any] = {"table": RECEIPTS, "created_at": created_at}
    for name, value in zip(_RECEIPT_NAMES, values, strict=False):
        if value is not None:
            if name in _RECEIPT_JSON:
                value = loads(value)
            elif name in _RECEIPT_TIMES:
                value = _time_text(value)
            elif name in _RECEIPT_FLOATS:
                value = float(value)
        document[name] = value
    return entry_digest(sorted_json(document))


def row_digest(table: str, row: Mapping[str, Any]) -> str:
    """A row's digest as it will read back: JSON documents the encoding turns into
    something else (a datetime into its text, an integer key into a string) are
    taken as they are stored."""
    try:
        content = entry_content(table, row)
    except (TypeError, ValueError):
        stored = {
            name: loads(dumps(value))
            if name in _JSON_COLUMNS[table] and value is not None
            else value
            for name, value in row.items()
        }
        content = entry_content(table, stored)
    return entry_digest(content)


def _audit_chain(row: Mapping[str, Any]) -> str:
    return chain_id_of(row["run_id"], row["at"])


def chain_ids(batch: Batch) -> set[str]:
    """The chains the batch's rows belong to."""
    ids = {row["run_id"] for row in batch.receipts}
    ids.update(values[_RUN_ID] for values in batch.encoded)
    ids.update(row["run_id"] for row in batch.replaced)
    for event in batch.audit:
        if isinstance(event, AuditEvent):
            ids.add(chain_id_of(event.run_id, event.at))
        else:
            at = event.get("at")
            ids.add(chain_id_of(event.get("run_id"), at if at is not None else _now()))
    ids.update(_audit_chain(row) for row in batch.replaced_audit)
    ids.update(_audit_chain(row) for row in batch.audit_rows)
    return ids


def _now() -> datetime:
    return datetime.now(UTC)


class _Linker:
    """Positions and links, chain by chain, from the heads given."""

    def __init__(self, heads: dict[str, Head]) -> None:
        self.heads = heads

    def next(self, chain_id: str, digest: str) -> tuple[int, str]:
        head = self.heads.get(chain_id)
        if head is None:
            head = Head(0, genesis(chain_id))
        position, linked = head.length + 1, link(head.link, digest)
        self.heads[chain_id] = Head(position, linked)
        return position, linked


def link_batch(batch: Batch, heads: dict[str, Head]) -> Batch:
    """The batch with every receipt and audit row linked from `heads`, which is
    updated to the heads after it. A chain `heads` does not hold starts at its
    genesis. The engine's events become the rows they are stored as."""
    linker = _Linker(heads)
    receipts = layout_of(Receipt)
    created_at = rfc3339(batch.created_at)
    rows = [_linked_row(RECEIPTS, complete(receipts, row), linker) for row in batch.receipts]
    encoded = []
    for values in batch.encoded:
        position, linked = linker.next(values[_RUN_ID], encoded_receipt_digest(values, created_at))
        encoded.append((*values[:_CHAIN_SEQ], position, linked))
    replaced = [_linked_row(RECEIPTS, complete(receipts, row), linker) for row in batch.replaced]
    audit_layout = layout_of(AuditEventRow)
    audit = [
        _linked_row(AUDIT_EVENTS, complete(audit_layout, row), linker)
        for row in [
            *stored_audit_rows(batch.audit),
            *batch.audit_rows,
            *batch.replaced_audit,
        ]
    ]
    return replace(
        batch,
        receipts=rows,
        encoded=encoded,
        replaced=replaced,
        audit=(),
        audit_rows=audit,
        replaced_audit=(),
    )


def _linked_row(table: str, row: dict[str, Any], linker: _Linker) -> dict[str, Any]:
    chain_id = row["run_id"] if table == RECEIPTS else _audit_chain(row)
    row.pop("chain_seq", None)
    row.pop("chain_link", None)
    position, linked = linker.next(chain_id, row_digest(table, row))
    row["chain_seq"] = position
    row["chain_link"] = linked
    return row


def checkpoint_runs(work: ChainWork, heads: Mapping[str, Head]) -> list[RunHead]:
    """The runs a due checkpoint covers: those pending and those the batch ends (a
    run with no entry is left out)."""
    assert work.checkpoint is not None
    covered = dict(work.checkpoint.pending)
    for run_id in work.ended:
        head = heads.get(run_id)
        if head is not None:
            covered[run_id] = head
    return [
        RunHead(run_id, head.length, head.link)
        for run_id, head in covered.items()
        if head.length > 0
    ]


class ChainKeeper:
    """The writer's chain heads and its checkpoints' schedule."""

    def __init__(
        self,
        checkpoint_runs: int = 100,
        signer: CheckpointSigner | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """`clock`: the UTC time the checkpoints' day is read from."""
        self._checkpoint_runs = max(1, checkpoint_runs)
        self._signer = signer
        self._clock = clock
        self._heads: dict[str, Head] = {}
        # Runs ended since the last checkpoint, with their heads.
        self._ended: dict[str, Head] = {}
        self._period_day: date | None = None  # the UTC day of the first of `_ended`

    def started(self, run_id: str) -> None:
        """A new run (started through the writer): its chain starts at its genesis."""
        self._remember(run_id, Head(0, genesis(run_id)))

    def _remember(self, chain_id: str, head: Head) -> None:
        heads = self._heads
        heads.pop(chain_id, None)
        heads[chain_id] = head
        while len(heads) > MAX_HEADS:
            del heads[next(iter(heads))]

    def unknown_runs(self, batch: Batch) -> set[str]:
        """The runs of the batch whose head the writer does not know."""
        needed = chain_ids(batch)
        needed.update(batch.ended)
        heads = self._heads
        return {
            chain_id
            for chain_id in needed
            if chain_id not in heads and not chain_id.startswith(DAY_CHAIN_PREFIX)
        }

    def read(self, found: Mapping[str, tuple[int, str]]) -> None:
        """Take in heads read from the database (`Backend.read_heads`)."""
        for run_id, head in found.items():
            self._remember(run_id, Head(*head))

    def prepare(self, batch: Batch) -> Batch:
        """The batch linked now (every run's head known: `read_heads`) when it has
        no audit row without a run and writes no checkpoint; else marked to be
        linked in its transaction."""
        needed = chain_ids(batch)
        needed.update(batch.ended)
        heads = self._heads
        known = {chain_id: heads[chain_id] for chain_id in needed if chain_id in heads}
        lookup = frozenset(needed - known.keys())
        due = self._due(batch.ended)
        work = ChainWork(known, lookup, batch.ended, due)
        if any(chain_id.startswith(DAY_CHAIN_PREFIX) for chain_id in lookup) or due is not None:
            work.in_transaction = True
            return replace(batch, chain=work)
        linked_heads = dict(known)
        linked = link_batch(batch, linked_heads)
        work.linked = linked_heads
        return replace(linked, chain=work)

    def _due(self, ended: Sequence[str]) -> CheckpointDue | None:
        if not ended:
            return None
        count = len(self._ended) + len(ended)
        today = self._clock().date()
        new_day = self._period_day is not None and today != self._period_day
        if count >= self._checkpoint_runs or new_day:
            return CheckpointDue(dict(self._ended), self._signer)
        return None

    def final(self) -> Batch | None:
        """A batch writing the last checkpoint, for the runs ended since the one before."""
        if not self._ended:
            return None
        work = ChainWork({}, checkpoint=CheckpointDue(dict(self._ended), self._signer))
        work.in_transaction = True  # linked (nothing) in its transaction, then checkpointed
        return Batch(chain=work)

    def committed(self, batch: Batch) -> None:
        """Take in the heads of a committed batch."""
        work = batch.chain
        if work is None or work.linked is None:
            return
        linked = work.linked
        ended = set(work.ended)
        for chain_id, head in linked.items():
            if chain_id in ended:
                self._heads.pop(chain_id, None)
                if head.length > 0:
                    self._ended[chain_id] = head
            elif not chain_id.startswith(DAY_CHAIN_PREFIX):
                self._remember(chain_id, head)
        for run_id in work.checkpointed:
            self._ended.pop(run_id, None)
        if not self._ended:
            self._period_day = None
        elif self._period_day is None:
            self._period_day = self._clock().date()


async def link_in_session(session: AsyncSession, batch: Batch) -> Batch:
    """The batch linked in the session's transaction (when `ChainKeeper.prepare`
    left it to the transaction), the heads it did not know read there; a due
    checkpoint is left to `checkpoint_in_session`."""
    work = batch.chain
    if work is None or not work.in_transaction:
        return batch
    heads = dict(work.known)
    if work.lookup:
        found = await ChainHeadRepository(session).heads(work.lookup)
        heads.update({chain_id: Head(*head) for chain_id, head in found.items()})
    linked = link_batch(batch, heads)
    work.linked = heads
    return linked


async def checkpoint_in_session(session: AsyncSession, batch: Batch) -> None:
    """Append the batch's due checkpoint, last in its transaction."""
    work = batch.chain
    if work is None or work.checkpoint is None or work.linked is None:
        return
    runs = checkpoint_runs(work, work.linked)
    work.checkpointed = tuple(run.run_id for run in runs) + tuple(work.checkpoint.pending)
    if runs:
        await ChainHeadRepository(session).add_checkpoint(runs, work.checkpoint.signer)


def stored_entry(row: Receipt) -> dict[str, Any] | None:
    """A stored receipt's entry (`seq`: its position, `digest`, `link`), for the
    audit row of its replacement to keep it verifiable; None when it is unchained."""
    if row.chain_seq is None or row.chain_link is None:
        return None
    columns = {column.name: getattr(row, column.key) for column in Receipt.__table__.columns}
    return {"seq": row.chain_seq, "digest": row_digest(RECEIPTS, columns), "link": row.chain_link}
