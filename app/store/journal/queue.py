"""What the group commit holds until its next transaction, and how a batch is
taken from it.

Rows join the open group; a group holds up to `max_batch` receipts and is one
transaction, whose future every row in it shares. Audit events queue apart and
join whichever transaction comes next.

A run's start may be queued without its run waiting for it, so the run's
receipts can come in a later transaction than its start. If the start's
transaction fails, the run's receipts, cache entries and end that are still
queued or come later are left out of every later transaction (their foreign key
would fail it, and the rows of every other run in it): the run learns of the
failure from its start's future. Its audit events are kept.

A resumed run's receipt for a call whose stored receipt had not succeeded
replaces that row in place (`supersede`); the replaced receipt is kept as an
audit event written in the same transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, overload

from app.engine.ports import AuditEvent, CachedOutput
from app.engine.receipt import Receipt
from app.store.journal.backend import Backend
from app.store.journal.batch import Batch
from app.store.journal.records import cache_entry_row, receipt_row
from app.store.journal.rows import RECEIPT_COLUMNS, RenderedTimes

logger = logging.getLogger("toolloop.writer")

# A call queues two audit events (`call.started`, `call.finished`) with its receipt;
# a transaction takes up to this many audit rows per receipt it may hold, so a
# full batch of receipts commits with its calls' events in one transaction.
AUDIT_ROWS_PER_RECEIPT = 3
# Runs whose start failed, remembered so that their later rows are left out. A
# run stops starting calls once it sees its start failed (`RunState`), so its
# rows stop coming within a call's length; the oldest are forgotten past this.
MAX_UNSTARTED_RUNS = 10_000
_RUN_ID = RECEIPT_COLUMNS.index("run_id")


@dataclass(slots=True)
class Claim:
    """A run that starts only if its idempotency key is claimed, and its own answer."""

    key_row: dict[str, Any]
    run_row: dict[str, Any]
    claimed: asyncio.Future[bool]


@dataclass(slots=True)
class Group:
    """Rows bound for one transaction, and the future they share. Receipts are kept
    as the engine's receipts with the backend's driver tuples (`encoded`)."""

    durable: asyncio.Future[None]
    claims: list[Claim] = field(default_factory=list)
    run_starts: list[dict[str, Any]] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    encoded: list[tuple[Any, ...]] = field(default_factory=list)
    cache_rows: list[dict[str, Any]] = field(default_factory=list)
    run_ends: list[dict[str, Any]] = field(default_factory=list)
    # Ends (of `run_ends`) written only if these earlier transactions committed.
    ends_after: list[tuple[dict[str, Any], list[asyncio.Future[None]]]] = field(
        default_factory=list
    )
    completions: list[dict[str, Any]] = field(default_factory=list)
    releases: list[dict[str, Any]] = field(default_factory=list)
    # Runs ended outside the writer (`GroupCommitWriter.run_ended`), for the chain.
    ended_elsewhere: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Taken:
    """A batch taken for a transaction, with whom to answer once it is written."""

    batch: Batch
    durable: asyncio.Future[None] | None = None
    claims: list[Claim] = field(default_factory=list)  # every claim, a key's repeats too
    starts: list[str] = field(default_factory=list)  # the runs it starts
    receipts: list[Receipt] = field(default_factory=list)  # written as `batch.encoded`
    rows: list[dict[str, Any]] = field(default_factory=list)  # receipts written as rows

    @property
    def count(self) -> int:
        return len(self.rows) + len(self.receipts)

    def committed_rows(self, max_output_bytes: int) -> Sequence[dict[str, Any]]:
        """The receipt rows as stored, for the listeners."""
        if not self.receipts:
            return self.rows
        return _ReceiptRows(self.receipts, max_output_bytes, self.batch.created_at)


class Pending:
    """The rows queued and not yet taken, and what taking them needs to know."""

    def __init__(self, backend: Backend, max_batch: int, max_output_bytes: int) -> None:
        self._backend = backend
        self._max_batch = max_batch
        self._max_output_bytes = max_output_bytes
        self.groups: deque[Group] = deque()
        self.open: Group | None = None  # the group new receipts join
        self.audit: list[AuditEvent | dict[str, Any]] = []
        self.backlog = 0  # receipts and audit rows queued and not yet taken
        # Started through the writer, their end not yet taken into a transaction.
        self.open_runs: set[str] = set()
        # Runs whose start failed to commit (insertion-ordered, bounded).
        self.unstarted: dict[str, None] = {}
        # (run_id, seq) -> the audit row recording the stored receipt the next one replaces.
        self.superseded: dict[tuple[str, int], dict[str, Any]] = {}
        # Datetimes rendered for SQLite since the last batch was taken.
        self._rendered: RenderedTimes = {}

    def __bool__(self) -> bool:
        return bool(self.groups or self.audit)

    def join(self) -> Group:
        """The group new rows join."""
        group = self.open
        if group is None or len(group.receipts) >= self._max_batch:
            group = self.open = Group(asyncio.get_running_loop().create_future())
            self.groups.append(group)
        return group

    def add_receipt(self, receipt: Receipt, cache_entry: CachedOutput | None) -> Group:
        group = self.join()
        group.receipts.append(receipt)
        values = self._backend.receipt_values(receipt, self._max_output_bytes, self._rendered)
        group.encoded.append(values)
        if cache_entry is not None:
            group.cache_rows.append(cache_entry_row(cache_entry))
        self.backlog += 1
        return group

    def full(self) -> bool:
        """Whether the next transaction already has all it can take."""
        groups = self.groups
        return bool(groups) and (len(groups) > 1 or len(groups[0].receipts) >= self._max_batch)

    def take(self) -> Taken:
        """The next transaction's batch: the oldest group and the audit rows it can take."""
        group = self.groups.popleft() if self.groups else None
        if group is self.open:
            self.open = None
        rendered, self._rendered = self._rendered, {}
        most = self._max_batch * AUDIT_ROWS_PER_RECEIPT
        events, self.audit = self.audit[:most], self.audit[most:]
        self.backlog -= len(events) + (0 if group is None else len(group.receipts))
        if group is None:
            return Taken(Batch(audit=events, rendered=rendered))
        return self._take_group(group, events, rendered)

    def _take_group(
        self, group: Group, events: list[AuditEvent | dict[str, Any]], rendered: RenderedTimes
    ) -> Taken:
        claims, repeated = _distinct_keys(group.claims)
        for end in group.run_ends:
            self.open_runs.discard(end["run_id"])
        ends = _ends_after_committed(group.run_ends, group.ends_after)
        receipts, encoded, cache_rows = group.receipts, group.encoded, group.cache_rows
        rows: list[dict[str, Any]] = []
        if receipts and (self.unstarted or self.superseded or cache_rows):
            # What only rows take: receipts of a run whose start failed left out, a
            # stored receipt replaced, cache entries (written through a session).
            rows = [receipt_row(receipt, self._max_output_bytes) for receipt in receipts]
            receipts, encoded = [], []
        if self.unstarted:
            rows, cache_rows, ends = self._leave_out_unstarted(rows, cache_rows, ends)
        # Stamped here, not by the column default, so listeners see the stored row.
        created_at = datetime.now(UTC)
        for row in rows:
            row.setdefault("created_at", created_at)
        inserts, replaced, replaced_audit = self._split(rows)
        claimed_runs = [claim.run_row for claim in claims]
        alone = self._alone(rows, encoded, group.run_starts, claimed_runs, ends)
        ended = tuple(end["run_id"] for end in ends) + tuple(group.ended_elsewhere)
        runs, claimed_runs, ends = _inserted_ended(group.run_starts, claimed_runs, ends)
        batch = Batch(
            claims=[(c.key_row, run) for c, run in zip(claims, claimed_runs, strict=True)],
            runs=runs,
            receipts=inserts,
            encoded=encoded,
            replaced=replaced,
            cache=cache_rows,
            audit=events,
            replaced_audit=replaced_audit,
            ends=ends,
            completions=group.completions,
            releases=group.releases,
            created_at=created_at,
            rendered=rendered,
            alone=alone,
            ended=ended,
        )
        starts = [row["id"] for row in group.run_starts] + [c.run_row["id"] for c in claims]
        return Taken(batch, group.durable, [*claims, *repeated], starts, receipts, rows)

    def forget_unstarted(self, run_ids: Sequence[str]) -> None:
        """The runs never started: nothing will end them, and their later rows are left out."""
        for run_id in run_ids:
            self.open_runs.discard(run_id)
            self.unstarted[run_id] = None
        while len(self.unstarted) > MAX_UNSTARTED_RUNS:
            del self.unstarted[next(iter(self.unstarted))]

    def _alone(
        self,
        rows: Sequence[dict[str, Any]],
        encoded: Sequence[tuple[Any, ...]],
        run_starts: Sequence[dict[str, Any]],
        claimed_runs: Sequence[dict[str, Any]],
        ends: Sequence[dict[str, Any]],
    ) -> bool:
        """Whether the batch ends the only run open. Only an end: a batch written on
        the loop's thread returns within the turn that took it, and the writer takes
        the next batch at once; had that next batch been a run's last receipts, the
        run's end, queued a turn or two after them, would miss their transaction."""
        if not ends or self.open_runs:
            return False
        runs = {row["run_id"] for row in rows}
        runs.update(values[_RUN_ID] for values in encoded)
        runs.update(row["id"] for row in run_starts)
        runs.update(row["id"] for row in claimed_runs)
        runs.update(end["run_id"] for end in ends)
        return len(runs) <= 1

    def _leave_out_unstarted(
        self,
        rows: list[dict[str, Any]],
        cache_rows: list[dict[str, Any]],
        run_ends: list[dict[str, Any]],
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """The rows less those of runs whose start failed (receipts, the cache entries
        they are the source of, ends)."""
        unstarted = self.unstarted
        kept = [row for row in rows if row["run_id"] not in unstarted]
        if len(kept) < len(rows):
            logger.warning(
                "left out %d receipts of runs whose start could not be recorded",
                len(rows) - len(kept),
            )
            left_out = {row["id"] for row in rows if row["run_id"] in unstarted}
            cache_rows = [row for row in cache_rows if row["source_receipt_id"] not in left_out]
        return kept, cache_rows, [end for end in run_ends if end["run_id"] not in unstarted]

    def _split(
        self, rows: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(rows to insert, rows replacing a stored receipt, the audit rows of the latter)."""
        if not self.superseded:
            return rows, [], []
        inserts, replaced, audit = [], [], []
        for row in rows:
            superseded = self.superseded.pop((row["run_id"], row["seq"]), None)
            if superseded is None:
                inserts.append(row)
                continue
            replaced.append(row)
            audit.append(
                {**superseded, "detail": {**superseded["detail"], "superseded_by": row["id"]}}
            )
        return inserts, replaced, audit


def _ends_after_committed(
    run_ends: list[dict[str, Any]],
    ends_after: Sequence[tuple[dict[str, Any], Sequence[asyncio.Future[None]]]],
) -> list[dict[str, Any]]:
    """The ends less those waiting on an earlier transaction that did not commit. The
    earlier transactions were written before this one, so each has its answer."""
    if not ends_after:
        return run_ends
    left_out = {
        id(end)
        for end, earlier in ends_after
        if not all(
            future.done() and not future.cancelled() and future.exception() is None
            for future in earlier
        )
    }
    if not left_out:
        return run_ends
    logger.warning("left out %d run ends whose earlier receipts did not commit", len(left_out))
    return [end for end in run_ends if id(end) not in left_out]


def _inserted_ended(
    run_starts: list[dict[str, Any]],
    claimed_runs: list[dict[str, Any]],
    run_ends: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(run rows to insert, claimed run rows to insert, ends left to update): a run
    that starts and ends in one transaction is inserted as it ends, its end applied
    to its row, as the update would have left it. Nobody sees the row in between,
    and the update was the costliest statement of a batch of short runs. A run
    with more than one end
    in the transaction keeps them as updates, applied in order."""
    if not run_ends or not (run_starts or claimed_runs):
        return run_starts, claimed_runs, run_ends
    ends: dict[str, dict[str, Any] | None] = {}
    for end in run_ends:
        ends[end["run_id"]] = None if end["run_id"] in ends else end
    merged: set[str] = set()

    def ended(row: dict[str, Any]) -> dict[str, Any]:
        end = ends.get(row["id"])
        if end is None:
            return row
        merged.add(row["id"])
        count = end.get("call_count")
        return {
            **row,
            "status": end["status"],
            "outcome": end.get("outcome"),
            "call_count": row["call_count"] if count is None else count,
            "finished_at": end["finished_at"],
        }

    starts = [ended(row) for row in run_starts]
    claimed = [ended(row) for row in claimed_runs]
    if not merged:
        return run_starts, claimed_runs, run_ends
    return starts, claimed, [end for end in run_ends if end["run_id"] not in merged]


def _distinct_keys(claims: list[Claim]) -> tuple[list[Claim], list[Claim]]:
    """(the first claim of each key, the later ones): one transaction claims a key
    once, and a later claim of it in the same transaction would find it held."""
    first: dict[tuple[str, str], Claim] = {}
    repeated = []
    for claim in claims:
        key = (claim.key_row["caller"], claim.key_row["key"])
        if key in first:
            repeated.append(claim)
        else:
            first[key] = claim
    return list(first.values()), repeated


class _ReceiptRows(Sequence[dict[str, Any]]):
    """A committed batch's receipt rows for the listeners, made when first read: the
    batch went to the database as driver tuples, and a listener with no one to
    tell (no run's events followed) reads none."""

    def __init__(
        self, receipts: list[Receipt], max_output_bytes: int, created_at: datetime
    ) -> None:
        self._receipts = receipts
        self._max_output_bytes = max_output_bytes
        self._created_at = created_at
        self._rows: list[dict[str, Any]] | None = None

    def _made(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = []
            for receipt in self._receipts:
                row = receipt_row(receipt, self._max_output_bytes)
                row["created_at"] = self._created_at
                self._rows.append(row)
        return self._rows

    def __len__(self) -> int:
        return len(self._receipts)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | Sequence[dict[str, Any]]:
        return self._made()[index]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._made())
