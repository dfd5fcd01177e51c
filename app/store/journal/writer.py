"""The group commit (`GroupCommitWriter`): the journal's queue and its one loop
of take -> write -> resolve; how it goes is told in `app.store.journal`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from time import perf_counter
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.engine.ports import AuditEvent, CachedOutput
from app.engine.receipt import Receipt
from app.foundation.signing import CheckpointSigner
from app.foundation.stored_output import DEFAULT_MAX_STORED_OUTPUT_BYTES
from app.observability.receipts import (
    record_receipt_commit,
    record_wal_wait,
    record_writer_process_starts,
)
from app.store.journal.backend import Backend, choose_backend
from app.store.journal.batch import Batch
from app.store.journal.chain import ChainKeeper
from app.store.journal.outage import Outage, retry_transient, write_durably
from app.store.journal.postgres.process import PostgresWriterProcess
from app.store.journal.queue import Claim, Group, Pending, Taken
from app.store.journal.sqlite.checkpoints import WalKeeper
from app.store.journal.sqlite.process import SqliteWriterProcess
from app.store.types import utc_now

logger = logging.getLogger("toolloop.writer")


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # reported by the writer's log; retrieved so asyncio stays quiet


def _not_started(future: asyncio.Future[Any]) -> bool:
    """Whether a run start's future (`start_run`, `claim_run`) says it was not recorded."""
    return future.cancelled() or future.exception() is not None or future.result() is False


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _closed() -> asyncio.Future[Any]:
    closed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    closed.set_exception(RuntimeError("the receipt writer is closed"))
    return closed


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
        checkpoint_runs: int = 100,
        checkpoint_signer: CheckpointSigner | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """`clock`: the UTC time the chain's checkpoints read their day from."""
        self._backend: Backend = choose_backend(
            sessions, sqlite_process=sqlite_process, postgres_process=postgres_process
        )
        self._pending = Pending(self._backend, max_batch, max_stored_output_bytes)
        self._wal = wal
        self._process_starts = 0  # the backend's process starts counted so far
        self._max_output_bytes = max_stored_output_bytes
        self._linger_s = linger_s
        self._linger_min_open_runs = max(2, linger_min_open_runs)
        self._max_backlog = max_backlog
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
        self._outage = Outage()
        self._chain = ChainKeeper(checkpoint_runs, checkpoint_signer, clock)

    def add_listener(self, listener: Callable[[Sequence[dict[str, Any]]], None]) -> None:
        """Call `listener` with each batch's receipt rows (redacted) once they are committed."""
        self._listeners.append(listener)

    def supersede(self, run_id: str, audit_rows: Mapping[int, dict[str, Any]]) -> None:
        """The next receipt of `run_id` at each `seq` replaces the stored one; its
        audit row (`detail` gains `superseded_by`) is written in the same transaction."""
        for seq, row in audit_rows.items():
            self._pending.superseded[(run_id, seq)] = row

    def forget_superseded(self, run_id: str) -> None:
        """Drop what `supersede` left unused for the run (it ended before those calls)."""
        superseded = self._pending.superseded
        for key in [key for key in superseded if key[0] == run_id]:
            del superseded[key]

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="toolloop-group-commit")
        self._count_process_starts()

    def _count_process_starts(self) -> None:
        process = self._backend.process
        if process is not None and process.started != self._process_starts:
            record_writer_process_starts(
                process.started - self._process_starts,
                postgres=isinstance(process, PostgresWriterProcess),
            )
            self._process_starts = process.started

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def wal(self) -> WalKeeper | None:
        return self._wal

    @property
    def linger_s(self) -> float:
        return self._linger_s

    @property
    def linger_min_open_runs(self) -> int:
        return self._linger_min_open_runs

    @property
    def open_runs(self) -> frozenset[str]:
        """Runs started through the writer whose end it has not yet taken."""
        return frozenset(self._pending.open_runs)

    @property
    def unstarted_runs(self) -> tuple[str, ...]:
        """Runs whose start failed to commit, oldest first, whose later rows are left out."""
        return tuple(self._pending.unstarted)

    @property
    def backlog(self) -> int:
        """Receipts and audit rows queued and not yet written."""
        return self._pending.backlog

    def _join(self) -> Group | None:
        """The group new rows join (None once closing); the writer is woken for them."""
        if self._closing:
            return None
        self._wake.set()
        return self._pending.join()

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        """Queue a receipt; the future (shared with the rest of its transaction:
        never cancel it) resolves once it is committed."""
        if self._closing:
            return _closed()
        self._wake.set()
        return self._pending.add_receipt(receipt, cache_entry).durable

    def start_run(self, row: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a new run row (`Run` column names); it is inserted before any receipt
        of its transaction, and the future resolves once it is committed."""
        group = self._join()
        if group is None:
            return _closed()
        group.run_starts.append(row)
        self._pending.open_runs.add(row["id"])
        self._chain.started(row["id"])
        return group.durable

    def claim_run(self, key_row: dict[str, Any], run_row: dict[str, Any]) -> asyncio.Future[bool]:
        """Queue an idempotency key's claim (`IdempotencyKey` column names) with the
        run it starts (as `start_run`); both are inserted, before the other rows of
        their transaction, only if the key is new or expired. The future (the
        claim's own) resolves once the transaction committed: True when the key
        was claimed and the run recorded, False when the key is held (nothing of
        either was written); it raises what the transaction raised."""
        group = self._join()
        if group is None:
            return _closed()
        claimed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        group.claims.append(Claim(key_row, run_row, claimed))
        self._pending.open_runs.add(run_row["id"])
        self._chain.started(run_row["id"])
        return claimed

    def complete_key(self, row: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a claimed key's final response (`caller`, `key`, `state`,
        `response_status`, `response_body`, `run_id`: None keeps the stored one),
        applied after every other row of its transaction."""
        group = self._join()
        if group is None:
            return _closed()
        group.completions.append(row)
        return group.durable

    def end_run(self, values: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a run's end (`run_id`, `status`, `outcome`, `call_count`, `finished_at`),
        applied after the receipts of its transaction; its receipts were submitted
        before, so they are committed in this transaction or an earlier one."""
        group = self._join()
        if group is None:
            return _closed()
        group.run_ends.append(values)
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
        group = self._pending.open
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
        self._wake.set()
        group.run_ends.append(values)
        if earlier:
            group.ends_after.append((values, earlier))
        if answer is not None:
            group.completions.append(answer)
        return group.durable

    @property
    def in_outage(self) -> bool:
        """Whether a write failed with a transient error and is being retried."""
        return self._outage.on

    def outage(self) -> asyncio.Future[None]:
        """A future resolved when a write fails with a transient error (already resolved
        while one is being retried). Never cancel it: it is shared."""
        return self._outage.signal()

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

        claimed.add_done_callback(claimed_done)

    def run_ended(self, run_id: str) -> None:
        """A run ended outside the writer (its end written in a session of the
        service's): its chain's head as of the rows queued so far goes to the next
        checkpoint, as a run ended through `end_run` does."""
        group = self._join()
        if group is not None:
            group.ended_elsewhere.append(run_id)

    def emit(self, event: AuditEvent) -> None:
        self._queue_audit(event)

    def emit_row(self, row: dict[str, Any]) -> None:
        """Queue an already redacted audit row written by the service itself."""
        self._queue_audit(row)

    def _queue_audit(self, item: AuditEvent | dict[str, Any]) -> None:
        self._pending.audit.append(item)
        self._pending.backlog += 1
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
        if self._pending.backlog < self._max_backlog or self._closing:
            self._calls += 1
            if self._calls < self._turn_every or not (self._pending or self._writing):
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
        if not (self._pending or self._writing):
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
        await self._write_last_checkpoint()
        await self._backend.aclose()
        self._release_room()

    async def _run(self) -> None:
        pending = self._pending
        while True:
            await self._wake.wait()
            if (
                self._linger_s
                and len(pending.open_runs) >= self._linger_min_open_runs
                and not self._closing
                and not pending.full()
            ):
                await asyncio.sleep(self._linger_s)
            else:
                # One turn of the loop: what woke the writer is often a call's
                # start, and a quick call's end comes a turn later.
                await asyncio.sleep(0)
            self._wake.clear()
            self._writing = True
            while pending:
                await self._commit_next()
                if pending.backlog <= self._max_backlog // 2:
                    self._release_room()
                if pending:
                    # As before the first transaction: what came during the last one
                    # may be a run's receipts, whose end is queued a turn later (a
                    # parallel plan's lanes end in their tasks).
                    await asyncio.sleep(0)
            self._writing = False
            barriers, self._barriers = self._barriers, []
            for barrier in barriers:
                _resolve(barrier)
            if self._closing:
                return

    async def _commit_next(self) -> None:
        """One transaction: take the next batch, write it, answer its rows."""
        if self._wal is not None and self._wal.wal_is_long:
            # Before the batch is taken: what comes in meanwhile joins it.
            waited = perf_counter()
            await self._wal.catch_up()
            record_wal_wait(perf_counter() - waited)
        taken = self._pending.take()
        started = perf_counter()
        try:
            batch = await self._linked(taken.batch)
            won = await write_durably(self._backend, batch, self._outage)
        except Exception as exc:  # resolved into every waiting plan, which reports it
            record_receipt_commit(taken.count, perf_counter() - started, ok=False)
            logger.error("group commit of %d receipts failed: %s", taken.count, exc)
            self._fail(taken, exc)
            return
        finally:
            self._outage.end()
            self._count_process_starts()
        self._chain.committed(batch)
        record_receipt_commit(taken.count, perf_counter() - started, ok=True)
        if self._wal is not None:
            self._wal.note_commit()
        self._resolve(taken, won)

    async def _linked(self, batch: Batch) -> Batch:
        """The batch with its chain columns (or marked to get them in its transaction)."""
        unknown = self._chain.unknown_runs(batch)
        if unknown:
            backend = self._backend

            async def read() -> dict[str, tuple[int, str]]:
                return await backend.read_heads(unknown)

            self._chain.read(await retry_transient(read, "reading chain heads"))
        return self._chain.prepare(batch)

    async def _write_last_checkpoint(self) -> None:
        """At close: a checkpoint of the runs ended since the last one."""
        batch = self._chain.final()
        if batch is None:
            return
        try:
            await write_durably(self._backend, batch, self._outage)
        except Exception as exc:
            logger.error("the last chain checkpoint could not be written: %s", exc)
            return
        finally:
            self._outage.end()
        self._chain.committed(batch)

    def _fail(self, taken: Taken, exc: Exception) -> None:
        self._pending.forget_unstarted(taken.starts)
        for claim in taken.claims:
            if not claim.claimed.done():
                claim.claimed.set_exception(exc)
        if taken.durable is not None and not taken.durable.done():
            taken.durable.set_exception(exc)

    def _resolve(self, taken: Taken, won: set[str]) -> None:
        for claim in taken.claims:
            run_id = claim.run_row["id"]
            if run_id not in won:
                self._pending.open_runs.discard(run_id)
            if not claim.claimed.done():
                claim.claimed.set_result(run_id in won)
        committed = taken.committed_rows(self._max_output_bytes)
        for listener in self._listeners if committed else ():
            try:
                listener(committed)
            except Exception as exc:
                logger.error("a receipt listener failed: %s", exc, exc_info=exc)
        if taken.durable is not None and not taken.durable.done():
            taken.durable.set_result(None)

    def _release_room(self) -> None:
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)
