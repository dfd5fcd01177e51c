"""Group commit: receipts, their cache entries and audit events share transactions.

The engine submits a receipt and goes on; the writer collects whatever arrived
while the previous transaction was committing (plus a short linger) and writes
it in one transaction, then resolves that transaction's future, which every
receipt in it shares. A plan answers only after its own futures resolved, so a
receipt is durable before it is reported, yet concurrent plans never pay one
commit per call.

The backlog (receipts and audit rows not yet written) is bounded: past
`max_backlog`, `room()` tells the engine to hold new calls until the writer
has drained it to half. Receipts of calls already running are still accepted,
so the backlog never exceeds the bound by more than the calls in flight.

Rows go to the database through the repositories' driver-level bulk inserts
(`add_bulk`: one `executemany`, one JSON batch or one `COPY` per table and
transaction).
While the writer has work, every `turn_every`-th call start waits one turn of
the event loop (`room()`), so a long plan of calls that never wait cannot keep
the writer from sending earlier batches until it ends.

The linger is spent only while at least `linger_min_open_runs` runs are open
(started through the writer, their ends not yet written): it waits for rows
that could share the commit, and a lone run has no one to wait for; a few runs
bring too little company to pay for the wait (docs/benchmarks.md, section 4,
tenth round). Without a linger the writer still lets the loop turn once
before it takes a transaction: a quick call's `call.started` wakes it, and the
call's receipt, its `call.finished` and the run's end come in that turn; taken
at once, the start alone was one more commit for a lone plan to wait for.

A call's `call.started` and `call.finished` events that fall in one
transaction share one audit row (the audit read expands it:
`app.store.repositories.audit`); a crash cannot separate them, since what one
transaction writes commits whole or not at all.

On SQLite, once the WAL checkpointer (`wal`) finds the WAL long, the next batch
waits for one checkpoint pass before it is taken, so that its transaction
starts the WAL over (`app.store.checkpoints`); rows that come in meanwhile join it.
Each committed batch is noted to the checkpointer, whose passes come often only
while commits do.

A run's start may be queued without its run waiting for it (a plan of read
tools: `app.service.plans`), so the run's receipts can come in a later
transaction than its start. If the start's transaction fails, the run's
receipts, cache entries and end that are still queued or come later are left
out of every later transaction (their foreign key would fail it, and the rows
of every other run in it): the run learns of the failure from its start's
future. Its audit events are kept.

A run started under an idempotency key is queued with the key's claim
(`claim_run`): the key and the run are written first in their transaction,
the run only if the key was claimed (new, or expired), and a held key fails
nothing else; each claim learns from a future of its own whether it claimed.
The key's answer can join the transaction of the run's end (`end_run_with`),
so the two commit together.

On a SQLite file the service's writer sends each batch to the SQLite writer
process (`sqlite_process`, `app.store.sqlite_writer`), which runs the
statements and the commit with its own interpreter, on the other core, while
the loop goes on; a batch that also replaces stored receipts or writes cache
entries is written here, on the shared connection. A process that ends with
a batch in flight counts as a dropped connection: the batch is retried,
after a look for its first row (it may have committed).

Without that process (`TOOLLOOP_SQLITE_WRITER_PROCESS=false`) the batch that
ends a lone run (no other run open, none other in the batch, at most
`HERE_MAX_ROWS` rows) is written on the event loop's thread instead of
aiosqlite's (`BulkWrite.execute(on_this_thread=True)`): its request waits for
it, the loop has nothing else to run meanwhile, and a hand-off to that thread
and back costs two thread wake-ups. Under load, batches hold several runs and
go to aiosqlite's thread, where SQLite's C code takes turns with the loop's
Python for the GIL.

A resumed run's receipt for a call whose stored receipt had not succeeded
replaces that row in place (`supersede`); the replaced receipt is kept as an
audit event written in the same transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from time import perf_counter
from typing import Any, Protocol, overload

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from app.engine.ports import AuditEvent, CachedOutput
from app.engine.receipt import Receipt
from app.observability.receipts import (
    record_receipt_commit,
    record_wal_wait,
    record_writer_process_starts,
)
from app.service.outage import is_transient, retry_transient
from app.service.receipt_rows import (
    AUDIT_COLUMNS,
    RECEIPT_COLUMNS,
    audit_event_rows,
    audit_event_values,
    cache_entry_row,
    receipt_row,
    receipt_values,
)
from app.service.stored_output import DEFAULT_MAX_STORED_OUTPUT_BYTES
from app.store.postgres_writer import PostgresWriterProcess
from app.store.repositories.bulk import (
    BulkWrite,
    RenderedTimes,
    audit_columns,
    receipt_columns,
    sqlite_time,
)
from app.store.repositories.cache import CacheRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from app.store.sqlite_writer import SqliteWriterProcess
from app.store.writer_process import WriterProcess

logger = logging.getLogger("toolloop.writer")

# A call queues two audit events (`call.started`, `call.finished`) with its receipt;
# a transaction takes up to this many audit rows per receipt it may hold, so a
# full batch of receipts commits with its calls' events in one transaction.
AUDIT_ROWS_PER_RECEIPT = 3
# A batch whose receipts are all one run's goes to PostgreSQL by COPY from this many
# receipts, not `bulk.COPY_MIN_ROWS`: COPY's extra round trips delay only that run,
# whose long plan waits on the server's work per row, which COPY makes lighter
# (docs/benchmarks.md, section 2, twenty-second round). Batches of many runs keep
# the JSON batch in one round trip: each round trip delays every run in them.
ONE_RUN_COPY_MIN_ROWS = 64
# Runs whose start failed, remembered so that their later rows are left out. A
# run stops starting calls once it sees its start failed (`RunState`), so its
# rows stop coming within a call's length; the oldest are forgotten past this.
MAX_UNSTARTED_RUNS = 10_000
# The most rows of a batch ending a lone run that is written on the event loop's
# thread: room for a ten-call plan's start, receipts, events and end, and a
# bound on how long the loop waits for SQLite.
HERE_MAX_ROWS = 64


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # reported by the writer's log; retrieved so asyncio stays quiet


def _not_started(future: asyncio.Future[Any]) -> bool:
    """Whether a run start's future (`start_run`, `claim_run`) says it was not recorded."""
    return future.cancelled() or future.exception() is not None or future.result() is False


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class WalKeeper(Protocol):
    """What the writer asks of a SQLite WAL checkpointer (`app.store.checkpoints`)."""

    @property
    def wal_is_long(self) -> bool: ...

    async def catch_up(self) -> None: ...

    def note_commit(self) -> None: ...


class _Claim:
    """A run that starts only if its idempotency key is claimed, and its own answer."""

    __slots__ = ("claimed", "key_row", "run_row")

    def __init__(
        self, key_row: dict[str, Any], run_row: dict[str, Any], claimed: asyncio.Future[bool]
    ) -> None:
        self.key_row = key_row
        self.run_row = run_row
        self.claimed = claimed


class _Group:
    """Rows bound for one transaction, and the future they share: keys claimed with
    the runs they start, runs that start, receipts (with their cache entries), runs
    that end, keys' final responses, keys freed.

    Receipts bound for the SQLite writer process or for PostgreSQL are kept as the
    engine's receipts with their driver tuples (`encoded`, `receipt_values`); any
    other writer keeps their rows."""

    __slots__ = (
        "cache_rows",
        "claims",
        "completions",
        "durable",
        "encoded",
        "ends_after",
        "receipts",
        "releases",
        "rows",
        "run_ends",
        "run_starts",
    )

    def __init__(self, durable: asyncio.Future[None]) -> None:
        self.durable = durable
        self.claims: list[_Claim] = []
        self.run_starts: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []
        self.receipts: list[Receipt] = []
        self.encoded: list[tuple[Any, ...]] = []
        self.cache_rows: list[dict[str, Any]] = []
        self.run_ends: list[dict[str, Any]] = []
        # Ends (of `run_ends`) written only if these earlier transactions committed.
        self.ends_after: list[tuple[dict[str, Any], list[asyncio.Future[None]]]] = []
        self.completions: list[dict[str, Any]] = []
        self.releases: list[dict[str, Any]] = []

    @property
    def size(self) -> int:
        """Receipts held."""
        return len(self.rows) + len(self.receipts)


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


class GroupCommitWriter:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        linger_s: float = 0.002,
        linger_min_open_runs: int = 5,
        max_batch: int = 1000,
        max_backlog: int = 100_000,
        turn_every: int = 25,
        max_stored_output_bytes: int = DEFAULT_MAX_STORED_OUTPUT_BYTES,
        wal: WalKeeper | None = None,
        sqlite_process: SqliteWriterProcess | None = None,
        postgres_process: PostgresWriterProcess | None = None,
    ) -> None:
        self._sessions = sessions
        self._wal = wal
        self._process = sqlite_process
        # PostgreSQL's transactions, when given, go through their process instead
        # of the writer's held connection.
        self._postgres_process = postgres_process
        self._process_starts = 0  # the process's starts counted so far
        # Datetimes rendered for SQLite since the last batch was taken (`receipt_values`).
        self._rendered: RenderedTimes = {}
        # PostgreSQL: the writer's engine is its own (`create_writer_engine`), and its
        # connection is kept from one batch to the next instead of a session per
        # batch (about 250 µs of the loop's time each); given back before any
        # session of the writer's (its pool holds one connection) and on failure.
        bind = sessions.kw.get("bind") if isinstance(sessions, async_sessionmaker) else None
        self._engine = bind if isinstance(bind, AsyncEngine) else None
        self._hold = self._engine is not None and self._engine.dialect.name == "postgresql"
        self._held: AsyncConnection | None = None
        if (sqlite_process is not None or postgres_process is not None or self._hold) and (
            receipt_columns() != RECEIPT_COLUMNS or audit_columns() != AUDIT_COLUMNS
        ):
            raise RuntimeError(
                "receipt_values or audit_event_values no longer match their tables' columns"
            )
        self._max_output_bytes = max_stored_output_bytes
        self._linger_s = linger_s
        self._linger_min_open_runs = max(2, linger_min_open_runs)
        self._max_batch = max_batch
        self._max_backlog = max_backlog
        self._groups: deque[_Group] = deque()
        self._open: _Group | None = None  # the group new receipts join
        self._audit: list[AuditEvent | dict[str, Any]] = []
        self._backlog = 0
        self._room: asyncio.Future[None] | None = None
        self._turn_every = turn_every
        self._calls = 0  # calls started since the writer was last given a turn
        self._next_turn: asyncio.Future[None] | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._writing = False
        self._barriers: list[asyncio.Future[None]] = []
        self._listeners: list[Callable[[Sequence[dict[str, Any]]], None]] = []
        # Resolved when a write fails with a transient error; replaced once one commits.
        self._outage: asyncio.Future[None] | None = None
        # (run_id, seq) -> the audit row recording the stored receipt the next one replaces.
        self._superseded: dict[tuple[str, int], dict[str, Any]] = {}
        # Started through the writer, their end not yet taken into a transaction.
        self._open_runs: set[str] = set()
        # Runs whose start failed to commit (insertion-ordered, bounded).
        self._unstarted: dict[str, None] = {}

    def add_listener(self, listener: Callable[[Sequence[dict[str, Any]]], None]) -> None:
        """Call `listener` with each batch's receipt rows (redacted) once they are committed."""
        self._listeners.append(listener)

    def supersede(self, run_id: str, audit_rows: Mapping[int, dict[str, Any]]) -> None:
        """The next receipt of `run_id` at each `seq` replaces the stored one; its
        audit row (`detail` gains `superseded_by`) is written in the same transaction."""
        for seq, row in audit_rows.items():
            self._superseded[(run_id, seq)] = row

    def forget_superseded(self, run_id: str) -> None:
        """Drop what `supersede` left unused for the run (it ended before those calls)."""
        for key in [key for key in self._superseded if key[0] == run_id]:
            del self._superseded[key]

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="toolloop-group-commit")
        self._count_process_starts()

    def _count_process_starts(self) -> None:
        process: WriterProcess | None = self._process or self._postgres_process
        if process is not None and process.started != self._process_starts:
            record_writer_process_starts(
                process.started - self._process_starts, postgres=process is self._postgres_process
            )
            self._process_starts = process.started

    @property
    def backlog(self) -> int:
        """Receipts and audit rows queued and not yet written."""
        return self._backlog

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        """Queue a receipt; the future (shared with the rest of its transaction:
        never cancel it) resolves once it is committed."""
        group = self._join()
        if group is None:
            return self._closed()
        if self._hold:
            group.receipts.append(receipt)
            group.encoded.append(receipt_values(receipt, self._max_output_bytes, None))
        elif self._process is None:
            group.rows.append(receipt_row(receipt, self._max_output_bytes))
        else:
            group.receipts.append(receipt)
            group.encoded.append(receipt_values(receipt, self._max_output_bytes, self._rendered))
        if cache_entry is not None:
            group.cache_rows.append(cache_entry_row(cache_entry))
        self._backlog += 1
        self._wake.set()
        return group.durable

    def start_run(self, row: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a new run row (`Run` column names); it is inserted before any receipt
        of its transaction, and the future resolves once it is committed."""
        group = self._join()
        if group is None:
            return self._closed()
        group.run_starts.append(row)
        self._open_runs.add(row["id"])
        self._wake.set()
        return group.durable

    def claim_run(self, key_row: dict[str, Any], run_row: dict[str, Any]) -> asyncio.Future[bool]:
        """Queue an idempotency key's claim (`IdempotencyKey` column names) with the
        run it starts (as `start_run`); both are inserted, before the other rows of
        their transaction, only if the key is new or expired. The future (the
        claim's own) resolves once the transaction committed: True when the key
        was claimed and the run recorded, False when the key is held (nothing of
        either was written); it raises what the transaction raised."""
        claimed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        group = self._join()
        if group is None:
            claimed.set_exception(RuntimeError("the receipt writer is closed"))
            return claimed
        group.claims.append(_Claim(key_row, run_row, claimed))
        self._open_runs.add(run_row["id"])
        self._wake.set()
        return claimed

    def complete_key(self, row: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a claimed key's final response (`caller`, `key`, `state`,
        `response_status`, `response_body`, `run_id`: None keeps the stored one),
        applied after every other row of its transaction."""
        group = self._join()
        if group is None:
            return self._closed()
        group.completions.append(row)
        self._wake.set()
        return group.durable

    def end_run(self, values: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a run's end (`run_id`, `status`, `outcome`, `call_count`, `finished_at`),
        applied after the receipts of its transaction; its receipts were submitted
        before, so they are committed in this transaction or an earlier one."""
        group = self._join()
        if group is None:
            return self._closed()
        group.run_ends.append(values)
        self._wake.set()
        return group.durable

    def end_run_with(
        self,
        pending: Sequence[asyncio.Future[None]],
        values: dict[str, Any],
        answer: dict[str, Any] | None = None,
    ) -> asyncio.Future[None] | None:
        """Queue a run's end (`end_run`) in the transaction of its last receipts: the
        one still open, when every future of `pending` not yet done is its future or
        an earlier transaction's. The end commits with those receipts, or fails
        with them; it is written only if the earlier transactions committed (they
        are written first), and left out otherwise: the run then fails on its
        receipts and is ended as interrupted. None when that cannot be promised (a
        receipt failed; the writer is closing; with `answer`, a receipt waits on an
        earlier transaction): queue the end once they are durable instead.
        `answer`: the run's idempotency key's final response (`complete_key`), in
        the same transaction as the end (not queued when None is returned)."""
        if self._closing:
            return None
        group = self._open
        earlier: list[asyncio.Future[None]] = []
        for future in pending:
            if future.done():
                if future.cancelled() or future.exception() is not None:
                    return None
            elif group is None or future is not group.durable:
                if answer is not None:
                    return None
                earlier.append(future)
        if group is None:  # every receipt already committed, or in an earlier transaction
            group = self._join()
            assert group is not None  # not closing
        group.run_ends.append(values)
        if earlier:
            group.ends_after.append((values, earlier))
        if answer is not None:
            group.completions.append(answer)
        self._wake.set()
        return group.durable

    @property
    def in_outage(self) -> bool:
        """Whether a write failed with a transient error and is being retried."""
        return self._outage is not None and self._outage.done()

    def outage(self) -> asyncio.Future[None]:
        """A future resolved when a write fails with a transient error (already resolved
        while one is being retried). Never cancel it: it is shared."""
        if self._outage is None:
            self._outage = asyncio.get_running_loop().create_future()
        return self._outage

    def end_once_started(self, started: asyncio.Future[Any], values: dict[str, Any]) -> None:
        """Queue the run's end (`end_run`) once its start commits (`start_run`, or
        `claim_run` answering True); nothing if it never does.

        For a start whose request was already answered (the database went away while
        it waited): a start committed later must not leave the run `running`."""

        def started_done(future: asyncio.Future[Any]) -> None:
            if _not_started(future):
                return
            self.end_run(values).add_done_callback(_retrieve)

        started.add_done_callback(started_done)

    def release_once_claimed(
        self, claimed: asyncio.Future[bool], caller: str, key: str, run_id: str
    ) -> None:
        """Free the key once `claim_run` claimed it (`claimed` answers True); for a
        claim whose request was already answered with a server error, which keeps
        no key, so that a retry can proceed."""

        def claimed_done(future: asyncio.Future[bool]) -> None:
            if _not_started(future):
                return
            group = self._join()
            if group is not None:
                group.releases.append({"caller": caller, "key": key, "run_id": run_id})
                self._wake.set()

        claimed.add_done_callback(claimed_done)

    def _join(self) -> _Group | None:
        """The group new rows join (None once closing)."""
        if self._closing:
            return None
        group = self._open
        if group is None or group.size >= self._max_batch:
            group = self._open = _Group(asyncio.get_running_loop().create_future())
            self._groups.append(group)
        return group

    @staticmethod
    def _closed() -> asyncio.Future[None]:
        closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        closed.set_exception(RuntimeError("the receipt writer is closed"))
        return closed

    def emit(self, event: AuditEvent) -> None:
        self._audit.append(event)
        self._backlog += 1
        self._wake.set()

    def emit_row(self, row: dict[str, Any]) -> None:
        """Queue an already redacted audit row written by the service itself."""
        self._audit.append(row)
        self._backlog += 1
        self._wake.set()

    def room(self) -> asyncio.Future[None] | None:
        """None while the backlog is under its bound; otherwise a future (shared:
        never cancel it) that resolves once the writer has drained it to half.

        Every `turn_every` calls, while the writer has work, it is instead a future
        resolved on the next turn of the event loop: calls that never wait (a long
        plan of quick tools) would otherwise hold the loop until the plan ends, and
        the writer could not send a row to the database before then. With a turn,
        the database inserts one batch (on its own core: the PostgreSQL server,
        SQLite's C code) while the engine runs the next calls.
        """
        if self._backlog < self._max_backlog or self._closing:
            self._calls += 1
            if self._calls < self._turn_every or not (self._groups or self._audit or self._writing):
                return None
            self._calls = 0
            return self._turn()
        if self._room is None:
            self._room = asyncio.get_running_loop().create_future()
        return self._room

    def _turn(self) -> asyncio.Future[None]:
        """A future resolved on the next turn of the loop (shared by the calls asking now)."""
        turn = self._next_turn
        if turn is None or turn.done():
            loop = asyncio.get_running_loop()
            turn = self._next_turn = loop.create_future()
            loop.call_soon(_resolve, turn)
        return turn

    async def flush(self) -> None:
        """Wait until everything queued before this call has been written (or failed)."""
        if not (self._groups or self._audit or self._writing):
            return
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._barriers.append(barrier)
        self._wake.set()
        await barrier

    async def aclose(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._give_back()
        self._release_room()

    async def _connection(self) -> AsyncConnection:
        """The held connection, connected anew when there is none."""
        held = self._held
        if held is None or held.closed or held.invalidated:
            assert self._engine is not None
            held = self._held = await self._engine.connect()
        return held

    async def _give_back(self) -> None:
        """Return the held connection to the writer's pool (an invalidated one is dropped)."""
        held, self._held = self._held, None
        if held is not None:
            await held.close()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if (
                self._linger_s
                and len(self._open_runs) >= self._linger_min_open_runs
                and not self._closing
                and not self._full()
            ):
                await asyncio.sleep(self._linger_s)
            else:
                # One turn of the loop: what woke the writer is often a call's
                # start, and a quick call's end comes a turn later.
                await asyncio.sleep(0)
            self._wake.clear()
            self._writing = True
            while self._groups or self._audit:
                await self._write_batch()
                if self._backlog <= self._max_backlog // 2:
                    self._release_room()
                if self._groups or self._audit:
                    # As before the first transaction: what came during the last one
                    # may be a run's receipts, whose end is queued a turn later (a
                    # parallel plan's lanes end in their tasks).
                    await asyncio.sleep(0)
            self._writing = False
            barriers, self._barriers = self._barriers, []
            for barrier in barriers:
                if not barrier.done():
                    barrier.set_result(None)
            if self._closing:
                return

    def _full(self) -> bool:
        """Whether the next transaction already has all it can take: lingering
        would only delay it (a long plan waiting for its receipts)."""
        groups = self._groups
        return bool(groups) and (len(groups) > 1 or groups[0].size >= self._max_batch)

    def _release_room(self) -> None:
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)

    def _leave_out_unstarted(
        self,
        rows: list[dict[str, Any]],
        cache_rows: list[dict[str, Any]],
        run_ends: list[dict[str, Any]],
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """The rows less those of runs whose start failed (receipts, the cache entries
        they are the source of, ends)."""
        unstarted = self._unstarted
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
        self, rows: list[dict[str, Any]], audit: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(rows to insert, rows replacing a stored receipt); adds the audit rows of the latter."""
        inserts, replaced = [], []
        for row in rows:
            superseded = self._superseded.pop((row["run_id"], row["seq"]), None)
            if superseded is None:
                inserts.append(row)
                continue
            replaced.append(row)
            audit.append(
                {**superseded, "detail": {**superseded["detail"], "superseded_by": row["id"]}}
            )
        return inserts, replaced

    def _lone(
        self,
        rows: Sequence[Mapping[str, Any]],
        run_starts: Sequence[Mapping[str, Any]],
        run_ends: Sequence[Mapping[str, Any]],
        claimed_runs: Sequence[Mapping[str, Any]],
        audit_rows: int,
    ) -> bool:
        """Whether the batch ends a lone run and is small enough to write on the loop's
        thread. Only an end: a batch written there returns within the turn that took
        it, and the writer takes the next batch at once; had that next batch been a
        run's last receipts, the run's end, queued a turn or two after them (a
        parallel plan's lanes end in their tasks), would miss their transaction."""
        size = len(rows) + len(run_starts) + len(run_ends) + len(claimed_runs) + audit_rows
        if not run_ends or self._open_runs or size > HERE_MAX_ROWS:
            return False
        runs = {row["run_id"] for row in rows}
        runs.update(row["id"] for row in run_starts)
        runs.update(row["id"] for row in claimed_runs)
        runs.update(end["run_id"] for end in run_ends)
        return len(runs) <= 1

    async def _write_batch(self) -> None:
        if self._wal is not None and self._wal.wal_is_long:
            # Before the batch is taken: what comes in meanwhile joins it.
            waited = perf_counter()
            await self._wal.catch_up()
            record_wal_wait(perf_counter() - waited)
        group = self._groups.popleft() if self._groups else None
        if group is self._open:
            self._open = None
        rows = [] if group is None else group.rows
        engine_receipts = [] if group is None else group.receipts
        encoded = [] if group is None else group.encoded
        rendered, self._rendered = self._rendered, {}
        cache_rows = [] if group is None else group.cache_rows
        run_starts = [] if group is None else group.run_starts
        run_ends = [] if group is None else group.run_ends
        claims, repeated = _distinct_keys([] if group is None else group.claims)
        key_rows = [claim.key_row for claim in claims]
        claimed_runs = [claim.run_row for claim in claims]
        completions = [] if group is None else group.completions
        releases = [] if group is None else group.releases
        for end in run_ends:
            self._open_runs.discard(end["run_id"])
        if group is not None and group.ends_after:
            run_ends = _ends_after_committed(run_ends, group.ends_after)
        most = self._max_batch * AUDIT_ROWS_PER_RECEIPT
        events, self._audit = self._audit[:most], self._audit[most:]
        self._backlog -= len(rows) + len(engine_receipts) + len(events)
        if engine_receipts and (self._unstarted or self._superseded or cache_rows):
            # What only rows take: receipts of a run whose start failed left out, a
            # stored receipt replaced, cache entries (written on the service's side).
            rows = [receipt_row(receipt, self._max_output_bytes) for receipt in engine_receipts]
            engine_receipts, encoded = [], []
        if self._unstarted:
            rows, cache_rows, run_ends = self._leave_out_unstarted(rows, cache_rows, run_ends)
        # To a writer process, the engine's events go as driver tuples too; rows
        # otherwise (and where replaced receipts add audit rows).
        process = self._process or self._postgres_process
        direct = process is not None and not (self._superseded or cache_rows)
        audit = [] if direct else audit_event_rows(events)
        audit_values = (
            audit_event_values(events, None if self._process is None else rendered)
            if direct
            else []
        )
        started = perf_counter()
        # Stamped here, not by the column default, so listeners see the stored row.
        created_at = datetime.now(UTC)
        for row in rows:
            row.setdefault("created_at", created_at)
        if encoded and not self._hold:  # PostgreSQL takes the shared `created_at` apart
            created = (sqlite_time(created_at, rendered),)
            encoded = [values + created for values in encoded]
        count = len(rows) + len(encoded)
        first_receipt_id = rows[0]["id"] if rows else encoded[0][0] if encoded else None
        inserts, replaced = (rows, []) if not self._superseded else self._split(rows, audit)
        lone = (
            self._process is None
            and not self._hold
            and self._lone(rows, run_starts, run_ends, claimed_runs, len(audit))
        )
        inserted_runs, inserted_claims, updated_ends = _inserted_ended(
            run_starts, claimed_runs, run_ends
        )
        attempts = 0
        won: set[str] = set()

        async def write() -> None:
            try:
                await write_once()
            except Exception as exc:
                if is_transient(exc) and not self.outage().done():
                    self.outage().set_result(None)
                raise

        async def write_once() -> None:
            nonlocal attempts, won
            attempts += 1
            if attempts > 1:
                await self._give_back()
                async with self._sessions() as session:
                    runs = RunRepository(session)
                    stored = await _stored_runs(runs, claimed_runs)
                    receipts = ReceiptRepository(session)
                    if stored or await self._committed(
                        receipts, runs, first_receipt_id, run_starts
                    ):
                        won = stored
                        return  # the last attempt committed; only its answer was lost
            first = BulkWrite()
            won = first.claim_runs(key_rows, inserted_claims)
            if replaced or cache_rows:
                await self._give_back()
                async with self._sessions() as session:
                    await first.add_runs(inserted_runs).add_receipts(inserts).execute(session)
                    receipts = ReceiptRepository(session)
                    for row in replaced:
                        if not await receipts.replace(row):
                            await receipts.add_many([row])
                    if cache_rows:
                        await CacheRepository(session).put_many(cache_rows)
                    await (
                        BulkWrite()
                        .finish_runs(updated_ends)
                        .add_audit(audit)
                        .complete_keys(completions)
                        .release_keys(releases)
                        .execute(session)
                    )
                    await session.commit()
                return
            # Every row of the batch, and the commit, in one driver round trip
            # (on PostgreSQL, a few when large inserts go by COPY: the audit rows
            # before the ends, so that the two COPYs need no round trip between).
            batch = first.add_runs(inserted_runs).add_receipts(
                inserts, copy_min_rows=_copy_min_rows(inserts, _run_of_row)
            )
            if self._hold:
                batch.add_postgres_receipts(
                    encoded, created_at, copy_min_rows=_copy_min_rows(encoded, _run_of_values)
                )
            else:
                batch.add_encoded_receipts(encoded)
            batch.add_audit(audit)
            if self._postgres_process is not None:
                batch.add_postgres_audit(audit_values)
            else:
                batch.add_encoded_audit(audit_values)
            batch.finish_runs(updated_ends).complete_keys(completions).release_keys(releases)
            if self._process is not None:
                # The process's connection: no session.
                await batch.execute_in(self._process, rendered)
                return
            if self._postgres_process is not None:
                await batch.execute_in(self._postgres_process)
                return
            if self._hold:
                try:
                    await batch.execute_on(await self._connection())
                except BaseException:
                    await self._give_back()
                    raise
                return
            # Not `sessions.begin()`: the driver commits with the batch's statements
            # (one round trip fewer); closing the session rolls back nothing.
            async with self._sessions() as session:
                await batch.execute(session, commit=True, on_this_thread=lone)

        try:
            # A short outage (a database restart) delays the batch instead of losing it.
            await retry_transient(write, "a group commit")
        except Exception as exc:  # resolved into every waiting plan, which reports it
            record_receipt_commit(count, perf_counter() - started, ok=False)
            logger.error("group commit of %d receipts failed: %s", count, exc)
            for row in [*run_starts, *claimed_runs]:  # never started: nothing will end them
                self._open_runs.discard(row["id"])
                self._unstarted[row["id"]] = None
            for claim in [*claims, *repeated]:
                if not claim.claimed.done():
                    claim.claimed.set_exception(exc)
            while len(self._unstarted) > MAX_UNSTARTED_RUNS:
                del self._unstarted[next(iter(self._unstarted))]
            if group is not None and not group.durable.done():
                group.durable.set_exception(exc)
            return
        finally:
            # The outage lasts while a write is being retried: once the retries end,
            # committed or given up, the next write finds out afresh (a start that
            # stayed refused would never see the database come back).
            if self.in_outage:
                self._outage = None
            self._count_process_starts()
        record_receipt_commit(count, perf_counter() - started, ok=True)
        if self._wal is not None:
            self._wal.note_commit()
        for claim in [*claims, *repeated]:
            run_id = claim.run_row["id"]
            if run_id not in won:
                self._open_runs.discard(run_id)
            if not claim.claimed.done():
                claim.claimed.set_result(run_id in won)
        committed: Sequence[dict[str, Any]] = (
            rows
            if not engine_receipts
            else _ReceiptRows(engine_receipts, self._max_output_bytes, created_at)
        )
        for listener in self._listeners if committed else ():
            try:
                listener(committed)
            except Exception as exc:
                logger.error("a receipt listener failed: %s", exc, exc_info=exc)
        if group is not None and not group.durable.done():
            group.durable.set_result(None)

    @staticmethod
    async def _committed(
        receipts: ReceiptRepository,
        runs: RunRepository,
        first_receipt_id: str | None,
        run_starts: Sequence[dict[str, Any]],
    ) -> bool:
        """Whether an earlier attempt of this batch committed (its first new row exists)."""
        if first_receipt_id is not None:
            return await receipts.get(first_receipt_id) is not None
        if run_starts:
            return await runs.get(run_starts[0]["id"]) is not None
        return False


def _copy_min_rows(receipts: Sequence[Any], run_of: Callable[[Any], Any]) -> int | None:
    """`ONE_RUN_COPY_MIN_ROWS` when that many receipts or more are all one run's
    (rows or driver tuples, `run_of` reading a receipt's run id)."""
    if len(receipts) < ONE_RUN_COPY_MIN_ROWS:
        return None
    run_id = run_of(receipts[0])
    return ONE_RUN_COPY_MIN_ROWS if all(run_of(receipt) == run_id for receipt in receipts) else None


_run_of_row = itemgetter("run_id")
_run_of_values = itemgetter(RECEIPT_COLUMNS.index("run_id"))


def _ends_after_committed(
    run_ends: list[dict[str, Any]],
    ends_after: Sequence[tuple[dict[str, Any], Sequence[asyncio.Future[None]]]],
) -> list[dict[str, Any]]:
    """The ends less those waiting on an earlier transaction that did not commit. The
    earlier transactions were written before this one, so each has its answer."""
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
    and the update was the costliest statement of a batch of short runs
    (docs/benchmarks.md, section 4, eighteenth round). A run with more than one end
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


def _distinct_keys(claims: list[_Claim]) -> tuple[list[_Claim], list[_Claim]]:
    """(the first claim of each key, the later ones): one transaction claims a key
    once, and a later claim of it in the same transaction would find it held."""
    first: dict[tuple[str, str], _Claim] = {}
    repeated = []
    for claim in claims:
        key = (claim.key_row["caller"], claim.key_row["key"])
        if key in first:
            repeated.append(claim)
        else:
            first[key] = claim
    return list(first.values()), repeated


async def _stored_runs(runs: RunRepository, rows: Sequence[dict[str, Any]]) -> set[str]:
    """The ids of `rows` (run starts) already stored."""
    return {row["id"] for row in rows if await runs.get(row["id"]) is not None}
