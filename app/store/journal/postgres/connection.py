"""A batch written on a PostgreSQL connection of the service's own.

A batch that is a transaction of its own goes with its statements as one simple
query, their values written in as literals (`app.store.journal.postgres.literals`);
one in the caller's transaction, or one with a COPY, goes in pipelines (one
network round trip each), each COPY between them. Rows that need a statement
each (JSON cannot carry them) go one statement at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.journal.batch import Batch
from app.store.journal.events import audit_event_rows, audit_event_values
from app.store.journal.postgres import driver
from app.store.journal.postgres.encoding import (
    Claims,
    Copy,
    Encoded,
    Ends,
    Insert,
    Sent,
    Step,
    Tuples,
    completions,
    releases,
)
from app.store.journal.postgres.literals import Literals, NotALiteral, literal_template
from app.store.journal.rows import RECEIPT_COLUMNS, aware, encode, layout_of
from app.store.models import AuditEvent, Receipt, Run

# A batch whose receipts are all one run's goes by COPY from this many receipts,
# not `COPY_MIN_ROWS`: COPY's extra round trips delay only that run, whose long
# plan waits on the server's work per row, which COPY makes lighter. Batches of
# many runs keep the JSON batch in one round trip: each round trip delays every
# run in them.
ONE_RUN_COPY_MIN_ROWS = 64
_RUN_ID = RECEIPT_COLUMNS.index("run_id")


def copy_min_rows(run_ids: Sequence[Any]) -> int | None:
    """`ONE_RUN_COPY_MIN_ROWS` for that many receipts or more, all one run's; None
    (`COPY_MIN_ROWS`) otherwise."""
    if len(run_ids) >= ONE_RUN_COPY_MIN_ROWS and all(run == run_ids[0] for run in run_ids):
        return ONE_RUN_COPY_MIN_ROWS
    return None


def steps(batch: Batch, claimed: set[str], *, audit_tuples: bool = False) -> list[Step]:
    """The batch's steps (the claims' runs go to `claimed`); the audit rows as driver
    tuples, always by COPY, with `audit_tuples` (the writer process's way)."""
    found: list[Step] = []
    if batch.claims:
        found.append(Claims([c[0] for c in batch.claims], [c[1] for c in batch.claims], claimed))
    if batch.runs:
        found.append(Insert(layout_of(Run), batch.runs))
    if batch.receipts:
        least = copy_min_rows([row["run_id"] for row in batch.receipts])
        found.append(Insert(layout_of(Receipt), batch.receipts, least))
    if batch.encoded:
        aware(batch.created_at)
        least = copy_min_rows([values[_RUN_ID] for values in batch.encoded])
        found.append(Encoded(layout_of(Receipt), batch.encoded, batch.created_at, least))
    if batch.audit or batch.audit_rows or batch.replaced_audit:
        found.append(_audit(batch, audit_tuples))
    if batch.ends:
        found.append(Ends(batch.ends))
    if batch.completions:
        found.append(completions(batch.completions))
    if batch.releases:
        found.append(releases(batch.releases))
    return found


def _audit(batch: Batch, as_tuples: bool) -> Step:
    audit = layout_of(AuditEvent)
    if as_tuples:
        values = audit_event_values(batch.audit, None)
        values.extend(encode(audit, batch.audit_rows))
        values.extend(encode(audit, batch.replaced_audit))
        return Tuples(audit, values)
    return Insert(audit, [*audit_event_rows(batch.audit), *batch.audit_rows, *batch.replaced_audit])


async def write_on(connection: AsyncConnection, batch: Batch, *, commit: bool) -> set[str]:
    """Write the batch in the connection's transaction; with `commit`, commit it
    too, in the same round trip. The ids of the runs whose key was claimed."""
    claimed: set[str] = set()
    found = steps(batch, claimed)
    if not found:
        return claimed
    sent = [step.sent() for step in found]
    if any(item is None for item in sent):
        for step in found:
            await step.one_by_one(connection)
        if commit:
            await driver.commit(connection)
    else:
        await _send(connection, [item for item in sent if item is not None], commit)
    if commit:
        _note_commit(connection)
    return claimed


def _note_commit(connection: AsyncConnection) -> None:
    """Listeners of SQLAlchemy's `commit` event (commit counters) still see a commit
    the driver made itself."""
    sync = connection.sync_connection
    if sync is not None:
        sync.dispatch.commit(sync)


async def _send(connection: AsyncConnection, sent: list[Sent | Copy], commit: bool) -> None:
    raw, psycopg_connection = await driver.driver_of(connection)
    # A whole transaction of its own is sent as BEGIN, the statements and COMMIT:
    # without COPY, in one pipeline synced once (one round trip); each COPY
    # splits it, costing two more. psycopg's own transaction would cost two more
    # (it syncs after its implicit BEGIN, and the pipeline syncs again after a
    # `commit()`), so the connection is in autocommit meanwhile.
    status = psycopg_connection.pgconn.transaction_status
    own = commit and status == psycopg.pq.TransactionStatus.IDLE
    if own and not any(isinstance(item, Copy) for item in sent):
        statements = [item for item in sent if isinstance(item, Sent)]
        whole = _whole_query(psycopg_connection, statements)
        if whole is not None:
            await _send_whole(connection, raw, psycopg_connection, statements, *whole)
            return
    pipeline = _Pipeline(psycopg_connection, own=own, commit=commit)
    try:
        await pipeline.send(_segments(sent))
    except psycopg.Error as exc:
        await driver.raise_postgres(connection, raw, pipeline.statement, exc)
    finally:
        await pipeline.close()
        if own:
            await driver.end_own_transaction(connection, psycopg_connection)


class _Pipeline:
    """Segments sent in order: pipelines of statements, and COPYs between them."""

    def __init__(
        self, connection: psycopg.AsyncConnection[Any], *, own: bool, commit: bool
    ) -> None:
        self._connection = connection
        self._own = own
        self._commit = commit
        self.statement = ""  # the one being sent, to name it in an error
        # The claims' statement returns the runs it inserted: a cursor of its own,
        # read once the pipeline has synced.
        self._claims: list[tuple[psycopg.AsyncCursor[Any], set[str]]] = []

    async def send(self, segments: list[list[Sent] | Copy]) -> None:
        if self._own:
            await self._connection.set_autocommit(True)
        for position, segment in enumerate(segments):
            first, last = position == 0, position == len(segments) - 1
            if isinstance(segment, Copy):
                self.statement = segment.layout.copy_sql
                await driver.copy_rows(self._connection, segment.layout, segment.encoded)
                if last and self._commit:
                    await self._end()
            elif segment or (self._own and first) or (self._commit and last):
                await self._pipelined(segment, first=first, last=last)
        for claimed, won in self._claims:
            won.update(row[0] for row in await claimed.fetchall())

    async def _pipelined(self, segment: list[Sent], *, first: bool, last: bool) -> None:
        connection = self._connection
        async with connection.pipeline(), connection.cursor() as cursor:
            if self._own and first:
                await cursor.execute("BEGIN")
            for item in segment:
                self.statement = item.statement
                if item.many:
                    await cursor.executemany(item.statement, item.parameters)
                elif item.won is None:
                    await cursor.execute(item.statement, item.parameters, prepare=item.prepare)
                else:
                    claimed = connection.cursor()
                    await claimed.execute(item.statement, item.parameters)
                    self._claims.append((claimed, item.won))
            if self._commit and last:
                await self._end(cursor)  # in the pipeline: the same round trip

    async def _end(self, cursor: psycopg.AsyncCursor[Any] | None = None) -> None:
        self.statement = "COMMIT"
        if not self._own:
            await self._connection.commit()
        elif cursor is not None:
            await cursor.execute("COMMIT")
        else:
            await self._connection.execute("COMMIT")

    async def close(self) -> None:
        for claimed, _ in self._claims:
            await claimed.close()


def _segments(sent: Sequence[Sent | Copy]) -> list[list[Sent] | Copy]:
    """The statements in order: runs of pipelined ones, each COPY on its own. A
    transaction of its own starts with a pipeline, so that BEGIN costs no round
    trip of its own (it may hold BEGIN alone, before a COPY)."""
    segments: list[list[Sent] | Copy] = [[]]
    for item in sent:
        if isinstance(item, Copy):
            segments.append(item)
        elif isinstance(segments[-1], list):
            segments[-1].append(item)
        else:
            segments.append([item])
    return segments


def _whole_query(
    connection: psycopg.AsyncConnection[Any], sent: Sequence[Sent]
) -> tuple[bytes, list[tuple[int, set[str]]]] | None:
    """A transaction of statements without COPY as one simple query, its parameters
    written in as literals (`app.store.journal.postgres.literals`): (the query, the
    claims' statements by position with where their returned ids go); None
    when a value is not written so.

    The server runs a query of several statements as one transaction, committed
    once the last succeeds and rolled back whole when one fails; psycopg then
    reads one result per statement and skips the pipeline's machinery. The
    server plans each statement again, as it does those sent unprepared."""
    try:
        literals = Literals(connection.pgconn)
        statements: list[bytes] = []
        claims: list[tuple[int, set[str]]] = []
        for item in sent:
            template = literal_template(item.statement)
            if item.many:
                statements.extend(literals.statement(template, row) for row in item.parameters)
                continue
            if item.won is not None:
                claims.append((len(statements), item.won))
            statements.append(literals.statement(template, item.parameters))
    except NotALiteral:
        return None
    return b";\n".join(statements), claims


async def _send_whole(
    connection: AsyncConnection,
    raw: Any,
    psycopg_connection: psycopg.AsyncConnection[Any],
    sent: Sequence[Sent],
    query: bytes,
    claims: Sequence[tuple[int, set[str]]],
) -> None:
    """Run `_whole_query`'s query in autocommit (no BEGIN of psycopg's: the query is
    its own transaction) and read the ids the claims returned."""
    try:
        await psycopg_connection.set_autocommit(True)
        async with psycopg_connection.cursor() as cursor:
            await cursor.execute(query)
            position = 0
            for index, won in claims:
                while position < index:
                    cursor.nextset()
                    position += 1
                won.update(row[0] for row in await cursor.fetchall())
    except psycopg.Error as exc:
        # Named by the statements, not the query, which holds the rows' values.
        named = "; ".join(dict.fromkeys(item.statement for item in sent))
        await driver.raise_postgres(connection, raw, named, exc)
    finally:
        await driver.end_own_transaction(connection, psycopg_connection)
