"""Bulk inserts below the ORM: one driver call per table and batch.

The group commit writes thousands of receipt and audit rows per transaction;
through SQLAlchemy's Core `insert()` every row's every value went through the
type system in Python (a bind processor per JSON and datetime value, parameter
dictionaries, compiled-statement bookkeeping), which cost more than the
database itself. Here rows become plain tuples once and go to the driver in
one call:

- SQLite: one `executemany` (sqlite3 binds and steps the rows in C), in
  aiosqlite's thread or, through `execute_in`, in the SQLite writer process
  (`app.store.sqlite_writer`);
- PostgreSQL: one `INSERT ... SELECT ... FROM json_populate_recordset(...)`
  whose only parameter is the whole batch as one JSON array, written by
  orjson in C: the server parses and inserts it on its own core, and Python
  does almost nothing per row. A batch that is a transaction of its own goes
  with its other statements as one query, their values written in as
  literals (`app.store.postgres_literals`); one in the caller's transaction,
  in one pipeline. From `COPY_MIN_ROWS` rows, a table's rows go by binary `COPY`
  instead: psycopg writes each value in C (about 0.8 µs more per receipt in
  Python than the JSON batch) and the server, which no longer parses a JSON
  object per row, takes about 6 µs less per receipt; the batch then costs a
  few round trips more, which that many rows pay for. `COPY` also takes the
  batches the JSON path cannot: an integer beyond 64 bits, or a NUL
  character, in a JSON document. The group commit's receipts come as
  driver tuples made when each was queued (`add_postgres_receipts`): `COPY`
  takes them as they are, a JSON batch their JSON documents as written.

The group commit's transactions usually go to a writer process instead
(`execute_in`): SQLite's takes the statements above; PostgreSQL's
(`app.store.postgres_statements`) takes every table's rows as driver tuples,
writes them by binary `COPY`, and its other statements in pipelines.

Runs started under an idempotency key are inserted with the key's claim,
only when the claim succeeds (`BulkWrite.claim_runs`): one upsert per key in
aiosqlite's thread on SQLite, one statement for the batch on PostgreSQL.

Both run on the caller's connection, inside its transaction. Values are
encoded exactly as the column types would encode them (JSON text from
`app.store.serialization.dumps`; on SQLite, datetimes as naive UTC text in
SQLAlchemy's storage format), so a row reads back identically whichever path
wrote it, and driver errors are raised as SQLAlchemy's `DBAPIError`, as any
other statement's (`app.service.outage` tells transient ones by that).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from operator import itemgetter
from typing import Any, NoReturn, cast

import aiosqlite
import psycopg
from orjson import Fragment
from sqlalchemy import JSON, BigInteger, Boolean, ColumnDefault, Float, Integer, String, Table
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.store import postgres_statements, sqlite_statements
from app.store.models import AuditEvent, Base, IdempotencyKey, Receipt, Run
from app.store.postgres_literals import Literals, NotALiteral, literal_template
from app.store.postgres_writer import PostgresStatementFailed, PostgresWriterProcess
from app.store.serialization import dumps, json_bytes
from app.store.sqlite_statements import CLAIM_STATEMENT, SqliteClaims, SqliteStatement
from app.store.sqlite_writer import SqliteWriterProcess, StatementFailed, WriterProcessGone
from app.store.types import UtcDateTime


@dataclass(frozen=True, slots=True)
class _Layout:
    """How one table's rows become driver tuples."""

    columns: tuple[str, ...]
    values: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    json: tuple[tuple[int, bool], ...]  # (position, None is SQL NULL)
    times: tuple[int, ...]
    defaults: tuple[tuple[str, Callable[[], Any]], ...]  # for keys a row leaves out
    keys: frozenset[str]
    insert_sql: str
    copy_sql: str  # binary COPY; `copy_types` names each column's PostgreSQL type
    copy_types: tuple[str, ...]
    json_sql: str


_layouts: dict[str, _Layout] = {}


def _layout(table: Table) -> _Layout:
    layout = _layouts.get(table.name)
    if layout is None:
        layout = _layouts[table.name] = _build_layout(table)
    return layout


def _layout_of(model: type[Base]) -> _Layout:
    return _layout(cast(Table, model.__table__))


def _build_layout(table: Table) -> _Layout:
    # An autoincrementing integer key is left to the database.
    auto = table.autoincrement_column
    columns = [column for column in table.columns if column is not auto]
    names = tuple(column.name for column in columns)
    json = tuple(
        (index, bool(getattr(column.type, "none_as_null", False)))
        for index, column in enumerate(columns)
        if isinstance(column.type, JSON)
    )
    times = tuple(
        index for index, column in enumerate(columns) if isinstance(column.type, UtcDateTime)
    )
    defaults = tuple((column.name, _default(column.default, column.nullable)) for column in columns)
    quoted = ", ".join(f'"{name}"' for name in names)
    placeholders = ", ".join("?" for _ in names)
    return _Layout(
        columns=names,
        values=itemgetter(*names),
        json=json,
        times=times,
        defaults=defaults,
        keys=frozenset(names),
        insert_sql=f'INSERT INTO "{table.name}" ({quoted}) VALUES ({placeholders})',
        copy_sql=f'COPY "{table.name}" ({quoted}) FROM STDIN (FORMAT BINARY)',
        copy_types=tuple(_copy_type(column.type) for column in columns),
        json_sql=(
            f'INSERT INTO "{table.name}" ({quoted}) SELECT {quoted} '
            f'FROM json_populate_recordset(NULL::"{table.name}", %s::json)'
        ),
    )


# The PostgreSQL type whose binary format carries a column's values in `COPY`, by
# column type (the first that matches: BigInteger is an Integer). A `json` column's
# binary format is its text, which the JSON documents already are.
_COPY_TYPES: tuple[tuple[type[Any], str], ...] = (
    (JSON, "text"),
    (String, "text"),
    (UtcDateTime, "timestamptz"),
    (Boolean, "bool"),
    (Float, "float8"),
    (BigInteger, "int8"),
    (Integer, "int4"),
)


def _copy_type(column_type: Any) -> str:
    for kind, name in _COPY_TYPES:
        if isinstance(column_type, kind):
            return name
    raise NotImplementedError(f"no COPY format for column type {column_type!r}")


def _default(default: Any, nullable: bool | None) -> Callable[[], Any]:
    if isinstance(default, ColumnDefault):
        arg = default.arg
        if default.is_callable:
            return lambda: arg(None)  # SQLAlchemy wraps callables to take a context
        return lambda: arg
    if nullable:
        return lambda: None

    def missing() -> Any:
        return _MISSING

    return missing


_MISSING = object()

# From this many rows of one table, PostgreSQL takes them by binary COPY rather
# than as a JSON batch in the pipeline (docs/benchmarks.md, section 4, fifteenth round).
COPY_MIN_ROWS = 256


def _complete(layout: _Layout, row: Mapping[str, Any]) -> dict[str, Any]:
    """The row with the column defaults filled in for the keys it leaves out."""
    full = dict(row)
    for name, default in layout.defaults:
        if name not in full:
            value = default()
            if value is _MISSING:
                raise KeyError(f"row for a bulk insert has no value for column {name!r}")
            full[name] = value
    return full


# "YYYY-MM-DD HH:MM:SS." by the UTC second: the writer renders two or three
# datetimes per call, mostly within the same few seconds, and formatting an
# aware datetime whole costs about twice as much as this lookup.
_SECOND_PREFIXES: dict[tuple[int, int, int, int, int, int], str] = {}
_MAX_SECOND_PREFIXES = 4096


def _sqlite_time(value: datetime) -> str:
    """As `UtcDateTime` and SQLite's DATETIME store it: naive UTC, microseconds always."""
    if value.tzinfo is UTC:
        second = (value.year, value.month, value.day, value.hour, value.minute, value.second)
        prefix = _SECOND_PREFIXES.get(second)
        if prefix is None:
            if len(_SECOND_PREFIXES) >= _MAX_SECOND_PREFIXES:
                _SECOND_PREFIXES.clear()
            prefix = _SECOND_PREFIXES[second] = value.isoformat(" ")[:19] + "."
        # zfill and +, not f"{...:06d}": three quarters of the time.
        return prefix + str(value.microsecond).zfill(6)
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value.isoformat()} cannot be stored; use UTC")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


# A call's receipt and its audit events share their datetimes (the receipt's
# start and end are the events' times, and one batch's receipts one creation
# time): each is rendered once per transaction.
_TIMES = "toolloop.bulk.times"

# Datetimes rendered for SQLite, by `id` (the datetime kept beside its text, so a
# recycled id is never taken for it).
RenderedTimes = dict[int, tuple[datetime, str]]


def sqlite_time(value: datetime, rendered: RenderedTimes) -> str:
    """`value` as SQLite stores it (`_sqlite_time`), rendered once per `rendered`."""
    seen = rendered.get(id(value))
    if seen is None or seen[0] is not value:
        seen = rendered[id(value)] = (value, _sqlite_time(value))
    return seen[1]


def receipt_columns() -> tuple[str, ...]:
    """The columns a bulk insert of receipts writes, in the driver tuples' order."""
    return _layout_of(Receipt).columns


def audit_columns() -> tuple[str, ...]:
    """The columns a bulk insert of audit rows writes, in the driver tuples' order."""
    return _layout_of(AuditEvent).columns


def audit_row_values(row: Mapping[str, Any], rendered: RenderedTimes | None) -> tuple[Any, ...]:
    """An audit row (`AuditEvent` column names) as SQLite's driver takes it or, with
    `rendered` None, PostgreSQL's."""
    sqlite = rendered is not None
    return _encode(_layout_of(AuditEvent), [row], sqlite=sqlite, rendered=rendered)[0]


def _encode(
    layout: _Layout,
    rows: Sequence[Mapping[str, Any]],
    *,
    sqlite: bool,
    rendered: RenderedTimes | None = None,
) -> list[tuple[Any, ...]]:
    values = layout.values
    json = layout.json
    times = layout.times if sqlite else ()
    naive_checks = () if sqlite else layout.times  # psycopg's own error would not say why
    if rendered is None:
        rendered = {}
    encoded = []
    for row in rows:
        try:
            items = list(values(row))
        except KeyError:
            items = list(values(_complete(layout, row)))
        for index, none_is_null in json:
            value = items[index]
            if value is not None or not none_is_null:
                items[index] = dumps(value)
        for index in naive_checks:
            value = items[index]
            if value is not None and value.tzinfo is None:
                raise ValueError(f"naive datetime {value.isoformat()} cannot be stored; use UTC")
        for index in times:
            value = items[index]
            if value is not None:
                items[index] = sqlite_time(value, rendered)
        encoded.append(tuple(items))
    return encoded


async def insert_rows(
    session: AsyncSession, model: type[Base], rows: Sequence[Mapping[str, Any]]
) -> None:
    """Insert `rows` (keys are column names; missing ones take the column default)
    into the model's table in the session's transaction, in one driver call."""
    if not rows:
        return
    layout = _layout_of(model)
    connection = await session.connection()
    name = connection.dialect.name
    if name == "sqlite":
        encoded = _encode(layout, rows, sqlite=True, rendered=session.info.setdefault(_TIMES, {}))
        # exec_driver_sql: no compilation or type processing, but SQLAlchemy's own
        # error handling (wrapping, invalidation of a dead connection).
        await connection.exec_driver_sql(layout.insert_sql, encoded)
    elif name == "postgresql":
        await _postgres(connection, layout, rows)
    else:
        raise NotImplementedError(f"bulk inserts are not supported on {name}")


def _batch_json(layout: _Layout, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The rows as one JSON array of objects, or None when this path cannot take them.

    A key the row leaves out would be NULL, not the column default: such rows
    are completed first. orjson writes JSON documents compactly, exactly as
    `serialization.dumps` does, and PostgreSQL's `json` type keeps that text;
    `None` in a JSON column becomes SQL NULL (`json_populate_recordset` maps
    JSON null so), which is what the nullable JSON columns store for it.
    """
    keys = layout.keys
    complete = [row if row.keys() == keys else _complete(layout, row) for row in rows]
    times = [layout.columns[index] for index in layout.times]
    for row in complete:
        for name in times:
            value = row[name]
            if value is not None and value.tzinfo is None:
                raise ValueError(f"naive datetime {value.isoformat()} cannot be stored; use UTC")
    try:
        batch = json_bytes(complete)
    except TypeError:  # an integer beyond 64 bits
        return None
    return _without_nul(batch)


def _encoded_batch_json(
    layout: _Layout, values: Sequence[tuple[Any, ...]], created_at: datetime
) -> str | None:
    """`_batch_json` of rows given as PostgreSQL's driver tuples but for their last
    column, `created_at` (`add_postgres_receipts`): the same text, their JSON
    documents, already written, taken in as they are."""
    columns = layout.columns
    last = columns[-1]
    documents = [(index, columns[index]) for index, _ in layout.json]
    rows = []
    for row_values in values:
        row = dict(zip(columns, row_values, strict=False))  # all but the last
        row[last] = created_at
        for index, name in documents:
            text = row_values[index]
            if text is not None:
                row[name] = Fragment(text)
        rows.append(row)
    try:
        batch = json_bytes(rows)
    except TypeError:  # an integer beyond 64 bits outside the documents
        return None
    return _without_nul(batch)


def _without_nul(batch: bytes) -> str | None:
    """The batch as text, or None when it holds an escaped NUL.

    json_populate_recordset unescapes every string, and PostgreSQL text cannot
    hold NUL: a document holding one (which the `json` type stores) goes by COPY.
    Only an escape writes one: a batch without a backslash (most) is not searched
    for it (memchr, against some 0.5 ns a byte for the search)."""
    if b"\\" in batch and b"\\u0000" in batch:
        return None
    return batch.decode()


async def _postgres(
    connection: AsyncConnection, layout: _Layout, rows: Sequence[Mapping[str, Any]]
) -> None:
    batch = None if len(rows) >= COPY_MIN_ROWS else _batch_json(layout, rows)
    # Encoded before the statement is sent: a row that cannot be stored sends nothing.
    encoded = None if batch is not None else _encode(layout, rows, sqlite=False)
    await _postgres_insert(connection, layout, batch, encoded)


async def _postgres_insert(
    connection: AsyncConnection,
    layout: _Layout,
    batch: str | None,
    encoded: Sequence[tuple[Any, ...]] | None,
) -> None:
    """Insert the rows as one JSON batch (`batch`) or, without one, by COPY."""
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, psycopg.AsyncConnection)
    statement = layout.json_sql if batch is not None else layout.copy_sql
    try:
        if batch is not None:
            async with driver.cursor() as cursor:
                await cursor.execute(layout.json_sql, (batch,))
        else:
            assert encoded is not None
            await _copy(driver, layout, encoded)
    except psycopg.Error as exc:
        disconnected = connection.dialect.is_disconnect(cast(Any, exc), raw.dbapi_connection, None)
        if disconnected:
            await connection.invalidate(exc)
        raise DBAPIError.instance(
            statement,
            None,
            exc,
            psycopg.Error,
            connection_invalidated=disconnected,
            dialect=connection.dialect,
        ) from exc


# A run's end, as `RunRepository.finish_many` writes it (a None `call_count`
# keeps the stored count). SQLite: one executemany of plain tuples; PostgreSQL:
# one UPDATE joined to the batch as a JSON record set. The planner takes any
# set-returning function for 100 rows and so joined the whole `runs` table by a
# sequential scan (a cost growing with every run ever stored); the ids, passed
# again as an array, let it find the rows through the primary key instead. It
# is planned at every execution, never prepared: a plan kept from when `runs`
# was nearly empty (a new database) scans it whole until an analyze replaces
# it (never, with autovacuum off), every batch longer than the last.
_FINISH_SQLITE = (
    'UPDATE "runs" SET "status" = ?, "outcome" = ?, '
    '"call_count" = coalesce(?, "call_count"), "finished_at" = ? WHERE "id" = ?'
)
_FINISH_POSTGRES = (
    'UPDATE "runs" SET "status" = e.status, "outcome" = e.outcome, '
    '"call_count" = coalesce(e.call_count, "runs"."call_count"), "finished_at" = e.finished_at '
    "FROM json_to_recordset(%s::json) AS e(run_id text, status text, outcome json, "
    "call_count integer, finished_at timestamptz) "
    'WHERE "runs"."id" = e.run_id AND "runs"."id" = ANY(%s::text[])'
)
_FINISH_POSTGRES_ROWS = (
    'UPDATE "runs" SET "status" = %s, "outcome" = %s::json, '
    '"call_count" = coalesce(%s, "call_count"), "finished_at" = %s WHERE "id" = %s'
)
# Up to this many ends, PostgreSQL takes them one row at a time, each found by its
# primary key through a prepared statement: the joined statement's planning costs
# more than a few rows do (docs/benchmarks.md, section 4, eleventh round).
_FINISH_BY_ROW_MAX = 8


# Runs started under an idempotency key: a key is claimed when it is new, or when
# the stored one has expired (it is then taken over in place), and its run is
# inserted only then; a key held by another request leaves both out, and the
# transaction goes on for every other row. The claim's `created_at` is "now".
def _claim_sets(table: str) -> str:
    columns = [name for name in _layout_of(IdempotencyKey).columns if name not in ("caller", "key")]
    assignments = ", ".join(f'"{name}" = excluded."{name}"' for name in columns)
    return (
        f'ON CONFLICT ("caller", "key") DO UPDATE SET {assignments} '
        f'WHERE "{table}"."expires_at" <= excluded."created_at"'
    )


@cache
def _claim_sqlite() -> str:
    layout = _layout_of(IdempotencyKey)
    return f'{layout.insert_sql} {_claim_sets("idempotency_keys")} RETURNING "run_id"'


@cache
def _claim_postgres() -> str:
    keys, runs = _layout_of(IdempotencyKey), _layout_of(Run)
    quoted = ", ".join(f'"{name}"' for name in runs.columns)
    selected = ", ".join(f'r."{name}"' for name in runs.columns)
    return (
        f'WITH claimed AS ({keys.json_sql} {_claim_sets("idempotency_keys")} RETURNING "run_id") '
        f'INSERT INTO "runs" ({quoted}) SELECT {selected} '
        'FROM json_populate_recordset(NULL::"runs", %s::json) AS r '
        'WHERE r."id" IN (SELECT "run_id" FROM claimed) RETURNING "id"'
    )


def _claim_operation(step: _Claim) -> tuple[Any, ...]:
    """The writer process's claims: the batch's keys in one statement, as JSON
    (`_claim_postgres`), or, when JSON cannot take them, one statement per key."""
    keys = _batch_json(_layout_of(IdempotencyKey), step.key_rows)
    runs = _batch_json(_layout_of(Run), step.run_rows)
    if keys is not None and runs is not None:
        return (postgres_statements.CLAIM, _claim_postgres(), [(keys, runs)])
    key_values = _encode(_layout_of(IdempotencyKey), step.key_rows, sqlite=False)
    run_values = _encode(_layout_of(Run), step.run_rows, sqlite=False)
    rows = [key + run for key, run in zip(key_values, run_values, strict=True)]
    return (postgres_statements.CLAIM, _claim_postgres_row(), rows)


@cache
def _claim_postgres_row() -> str:
    """The writer process's claim of one key (`postgres_statements`, "claim"): the key's
    values, then its run's, which is inserted only when the key was claimed, and
    whose id is then returned."""
    keys, runs = _layout_of(IdempotencyKey), _layout_of(Run)
    quoted = ", ".join(f'"{name}"' for name in runs.columns)
    json = {index for index, _ in runs.json}
    typed = ", ".join(
        f"%s::{'json' if index in json else kind}" for index, kind in enumerate(runs.copy_types)
    )
    return (
        f"WITH claimed AS ({_postgres_values_sql(keys)} {_claim_sets('idempotency_keys')} "
        f'RETURNING "run_id") INSERT INTO "runs" ({quoted}) SELECT {typed} FROM claimed '
        'RETURNING "id"'
    )


def _postgres_values_sql(layout: _Layout) -> str:
    """The layout's insert of one row, with psycopg's placeholders."""
    return layout.insert_sql.replace("?", "%s")


# A claimed key's final response (`IdempotencyRepository.complete`); a None `run_id`
# keeps the stored one. On PostgreSQL too, one statement per key (a batch holds
# a few, one per run ending in it), each found through the primary key: the
# batch joined as a JSON record set was planned once, while the table was nearly
# empty, and then scanned the growing table at every batch (`run ends` above).
_COMPLETE_SQLITE = (
    'UPDATE "idempotency_keys" SET "state" = ?, "response_status" = ?, '
    '"response_body" = ?, "run_id" = coalesce(?, "run_id") WHERE "caller" = ? AND "key" = ?'
)
_COMPLETE_POSTGRES = (
    'UPDATE "idempotency_keys" SET "state" = %s, "response_status" = %s, '
    '"response_body" = %s::json, "run_id" = coalesce(%s, "run_id") '
    'WHERE "caller" = %s AND "key" = %s'
)
# Keys freed (a claim whose request was answered with a server error after all).
_RELEASE_SQLITE = 'DELETE FROM "idempotency_keys" WHERE "caller" = ? AND "key" = ? AND "run_id" = ?'
_RELEASE_POSTGRES = (
    'DELETE FROM "idempotency_keys" WHERE "caller" = %s AND "key" = %s AND "run_id" = %s'
)


@dataclass(frozen=True, slots=True)
class _Claim:
    """Keys to claim, each with the run it starts (`key_rows[i]["run_id"]` is
    `run_rows[i]["id"]`); the runs whose key was claimed are added to `won`."""

    key_rows: Sequence[Mapping[str, Any]]
    run_rows: Sequence[Mapping[str, Any]]
    won: set[str]


@dataclass(frozen=True, slots=True)
class _Insert:
    layout: _Layout
    rows: Sequence[Mapping[str, Any]]
    copy_min_rows: int | None = None  # None: `COPY_MIN_ROWS`

    @property
    def by_copy(self) -> bool:
        """Whether PostgreSQL takes these rows by COPY rather than as a JSON batch."""
        least = COPY_MIN_ROWS if self.copy_min_rows is None else self.copy_min_rows
        return len(self.rows) >= least


@dataclass(frozen=True, slots=True)
class _Encoded:
    """Rows already in SQLite's driver form (`BulkWrite.add_encoded_receipts`,
    `BulkWrite.add_encoded_audit`)."""

    layout: _Layout
    values: Sequence[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class _PostgresEncoded:
    """Rows already in PostgreSQL's driver form but for their last column, which
    they share (`BulkWrite.add_postgres_receipts`)."""

    layout: _Layout
    values: Sequence[tuple[Any, ...]]
    last: Any
    copy_min_rows: int | None = None  # None: `COPY_MIN_ROWS`

    def json_batch(self) -> str | None:
        """The rows as one JSON batch, or None when they go by COPY."""
        least = COPY_MIN_ROWS if self.copy_min_rows is None else self.copy_min_rows
        if len(self.values) >= least:
            return None
        return _encoded_batch_json(self.layout, self.values, self.last)

    def copied(self) -> list[tuple[Any, ...]]:
        """The rows whole, for COPY."""
        last = (self.last,)
        return [values + last for values in self.values]


@dataclass(frozen=True, slots=True)
class _PostgresTuples:
    """Rows already in PostgreSQL's driver form (`BulkWrite.add_postgres_audit`),
    always written by COPY."""

    layout: _Layout
    values: Sequence[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class _Finish:
    ends: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class _Complete:
    rows: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class _Release:
    rows: Sequence[Mapping[str, Any]]


_Step = (
    _Insert
    | _Encoded
    | _PostgresEncoded
    | _PostgresTuples
    | _Finish
    | _Claim
    | _Complete
    | _Release
)


class BulkWrite:
    """Several tables' rows for one transaction, sent to the driver together.

    On SQLite every statement through `aiosqlite` is a round trip to its thread
    (a cursor, the statement, the cursor's close): here all of them run in one,
    in the order they were added. On PostgreSQL they go in one pipeline (one
    network round trip); an insert of `COPY_MIN_ROWS` rows or more (or of as
    many as its caller asks) goes by `COPY` between the pipelines of the
    statements before and after it, in the same transaction. Driver errors are
    raised as `DBAPIError`.

    With `commit=False` the session's transaction commits or rolls back as for
    any other statement. With `commit=True` the driver commits in the same
    round trip (on a failure it rolls back there), which spares the separate
    commit; SQLAlchemy's transaction is then empty, and the session must only
    be closed (its rollback finds nothing to undo).
    """

    __slots__ = ("_steps",)

    def __init__(self) -> None:
        self._steps: list[_Step] = []

    def add(
        self,
        model: type[Base],
        rows: Sequence[Mapping[str, Any]],
        *,
        copy_min_rows: int | None = None,
    ) -> BulkWrite:
        """Insert `rows` (as `insert_rows` does); on PostgreSQL by COPY from
        `copy_min_rows` rows (`COPY_MIN_ROWS` when None)."""
        if rows:
            self._steps.append(_Insert(_layout_of(model), rows, copy_min_rows))
        return self

    def add_encoded_receipts(self, values: Sequence[tuple[Any, ...]]) -> BulkWrite:
        """Insert receipts already encoded as SQLite's driver takes them: column for
        column (`receipt_columns`) what `add_receipts` would make of their rows.
        SQLite only."""
        if values:
            self._steps.append(_Encoded(_layout_of(Receipt), values))
        return self

    def add_postgres_receipts(
        self,
        values: Sequence[tuple[Any, ...]],
        created_at: datetime,
        *,
        copy_min_rows: int | None = None,
    ) -> BulkWrite:
        """Insert receipts already encoded as PostgreSQL's driver takes them: column for
        column (`receipt_columns`) what `add_receipts` would make of their rows (JSON
        documents as their text, datetimes aware), but for `created_at`, which they
        share (aware); by COPY from `copy_min_rows` rows (`COPY_MIN_ROWS` when None).
        PostgreSQL only."""
        if values:
            if created_at.tzinfo is None:
                raise ValueError(
                    f"naive datetime {created_at.isoformat()} cannot be stored; use UTC"
                )
            self._steps.append(
                _PostgresEncoded(_layout_of(Receipt), values, created_at, copy_min_rows)
            )
        return self

    def add_encoded_audit(self, values: Sequence[tuple[Any, ...]]) -> BulkWrite:
        """Audit rows already encoded as SQLite's driver takes them (`audit_columns`);
        ids are assigned in row order. SQLite only."""
        if values:
            self._steps.append(_Encoded(_layout_of(AuditEvent), values))
        return self

    def add_postgres_audit(self, values: Sequence[tuple[Any, ...]]) -> BulkWrite:
        """Audit rows already encoded as PostgreSQL's driver takes them (`audit_columns`;
        datetimes aware); ids are assigned in row order. By COPY. PostgreSQL only."""
        if values:
            self._steps.append(_PostgresTuples(_layout_of(AuditEvent), values))
        return self

    def add_runs(self, rows: Sequence[Mapping[str, Any]]) -> BulkWrite:
        return self.add(Run, rows)

    def add_receipts(
        self, rows: Sequence[Mapping[str, Any]], *, copy_min_rows: int | None = None
    ) -> BulkWrite:
        return self.add(Receipt, rows, copy_min_rows=copy_min_rows)

    def add_audit(self, rows: Sequence[Mapping[str, Any]]) -> BulkWrite:
        """Audit events; ids are assigned in row order."""
        return self.add(AuditEvent, rows)

    def claim_runs(
        self, key_rows: Sequence[Mapping[str, Any]], run_rows: Sequence[Mapping[str, Any]]
    ) -> set[str]:
        """Claim idempotency keys (`IdempotencyKey` rows, each naming its run), each
        inserting its run (`run_rows`, in the same order) only when the key was
        claimed: new, or expired. A key may appear once. Returns the set that
        holds, once `execute` returned, the ids of the runs inserted."""
        won: set[str] = set()
        if key_rows:
            self._steps.append(_Claim(key_rows, run_rows, won))
        return won

    def complete_keys(self, rows: Sequence[Mapping[str, Any]]) -> BulkWrite:
        """Store claimed keys' final responses: each row has `caller`, `key`, `state`,
        `response_status`, `response_body` (a JSON document) and `run_id` (None
        keeps the stored one)."""
        if rows:
            self._steps.append(_Complete(rows))
        return self

    def release_keys(self, rows: Sequence[Mapping[str, Any]]) -> BulkWrite:
        """Delete keys (`caller`, `key`) still held by the run that claimed them (`run_id`)."""
        if rows:
            self._steps.append(_Release(rows))
        return self

    def finish_runs(self, ends: Sequence[Mapping[str, Any]]) -> BulkWrite:
        """Record runs' ends: each has `run_id`, `status`, `outcome`, `call_count`
        (None keeps the stored count) and `finished_at` (aware)."""
        if ends:
            self._steps.append(_Finish(ends))
        return self

    def __bool__(self) -> bool:
        return bool(self._steps)

    async def execute(
        self, session: AsyncSession, *, commit: bool = False, on_this_thread: bool = False
    ) -> None:
        """`on_this_thread` (with `commit`): on SQLite, write on the calling thread
        (the event loop's) instead of aiosqlite's, unless another connection holds
        the write lock (`_executemany_here`); PostgreSQL ignores it."""
        if not self._steps:
            return
        connection = await session.connection()
        name = connection.dialect.name
        if name == "sqlite":
            await self._sqlite(session, connection, commit, here=on_this_thread and commit)
        elif name == "postgresql":
            await self._postgres(connection, commit)
        else:
            raise NotImplementedError(f"bulk writes are not supported on {name}")
        if commit:
            _committed(connection)

    async def execute_on(self, connection: AsyncConnection) -> None:
        """On PostgreSQL, the statements and their commit (`execute` with `commit=True`)
        on a connection the caller holds, with no session around it."""
        if not self._steps:
            return
        if connection.dialect.name != "postgresql":
            raise NotImplementedError("execute_on is PostgreSQL's")
        await self._postgres(connection, True)
        _committed(connection)

    async def execute_in(
        self,
        process: SqliteWriterProcess | PostgresWriterProcess,
        rendered: RenderedTimes | None = None,
    ) -> None:
        """Through the database's writer process: the statements and their commit in
        its transaction (`execute` with `commit=True`, on its connection); on
        PostgreSQL each table's rows by binary COPY. A process that ended while
        the batch was in flight (or, on PostgreSQL, lost its connection) raises
        `DBAPIError` with `connection_invalidated` set: the batch may or may not
        have committed. `rendered` (SQLite): datetimes already rendered for the
        batch (`sqlite_time`)."""
        if not self._steps:
            return
        if isinstance(process, PostgresWriterProcess):
            await self._in_postgres_process(process)
            return
        statements = self._sqlite_statements({} if rendered is None else rendered)
        try:
            await process.execute(statements)
        except StatementFailed as exc:
            raise DBAPIError.instance(
                exc.statement or CLAIM_STATEMENT, None, exc.error, sqlite3.Error
            ) from exc
        except WriterProcessGone as exc:
            raise _gone(exc, sqlite3.OperationalError, sqlite3.Error) from exc

    async def _in_postgres_process(self, process: PostgresWriterProcess) -> None:
        operations, claims = self._postgres_operations()
        try:
            won = await process.execute(operations)
        except PostgresStatementFailed as exc:
            raise DBAPIError.instance(
                exc.statement,
                None,
                exc.error,
                psycopg.Error,
                connection_invalidated=exc.connection_lost,
            ) from exc
        except WriterProcessGone as exc:
            raise _gone(exc, psycopg.OperationalError, psycopg.Error) from exc
        for target, ids in zip(claims, won, strict=True):
            target.update(ids)

    def _postgres_operations(self) -> tuple[list[tuple[Any, ...]], list[set[str]]]:
        """The steps as the writer process's operations (`app.store.postgres_statements`),
        and where each claim's won run ids go. Every row is encoded here, before
        anything is sent: a row that cannot be stored sends nothing."""
        operations: list[tuple[Any, ...]] = []
        claims: list[set[str]] = []
        for step in self._steps:
            if isinstance(step, _Insert | _PostgresEncoded | _PostgresTuples):
                layout = step.layout
                rows: Sequence[tuple[Any, ...]]
                if isinstance(step, _Insert):
                    rows = _encode(layout, step.rows, sqlite=False)
                else:
                    rows = step.copied() if isinstance(step, _PostgresEncoded) else step.values
                operations.append(
                    (postgres_statements.COPY, layout.copy_sql, layout.copy_types, rows)
                )
            elif isinstance(step, _Finish):
                operations.append(
                    (postgres_statements.MANY, _FINISH_POSTGRES_ROWS, _end_parameters(step.ends))
                )
            elif isinstance(step, _Claim):
                operations.append(_claim_operation(step))
                claims.append(step.won)
            elif isinstance(step, _Complete):
                operations.append(
                    (postgres_statements.MANY, _COMPLETE_POSTGRES, _completions(step.rows))
                )
            elif isinstance(step, _Release):
                operations.append(
                    (postgres_statements.MANY, _RELEASE_POSTGRES, _releases(step.rows))
                )
            else:
                raise NotImplementedError("rows encoded for SQLite cannot go to PostgreSQL")
        return operations, claims

    def _sqlite_statements(self, rendered: RenderedTimes) -> list[SqliteStatement]:
        statements: list[SqliteStatement] = []
        for step in self._steps:
            if isinstance(step, _Insert):
                encoded = _encode(step.layout, step.rows, sqlite=True, rendered=rendered)
                statements.append((step.layout.insert_sql, encoded))
            elif isinstance(step, _Encoded):
                statements.append((step.layout.insert_sql, list(step.values)))
            elif isinstance(step, _PostgresEncoded | _PostgresTuples):
                raise NotImplementedError("rows encoded for PostgreSQL cannot go to SQLite")
            elif isinstance(step, _Finish):
                statements.append((_FINISH_SQLITE, _sqlite_ends(step.ends, rendered)))
            elif isinstance(step, _Claim):
                keys = _encode(_layout_of(IdempotencyKey), step.key_rows, sqlite=True)
                runs = _encode(_layout_of(Run), step.run_rows, sqlite=True, rendered=rendered)
                ids = [row["id"] for row in step.run_rows]
                statements.append(
                    SqliteClaims(
                        keys, runs, ids, step.won, _claim_sqlite(), _layout_of(Run).insert_sql
                    )
                )
            elif isinstance(step, _Complete):
                statements.append((_COMPLETE_SQLITE, _completions(step.rows)))
            else:
                statements.append((_RELEASE_SQLITE, _releases(step.rows)))
        return statements

    async def _sqlite(
        self, session: AsyncSession, connection: AsyncConnection, commit: bool, *, here: bool
    ) -> None:
        statements = self._sqlite_statements(session.info.setdefault(_TIMES, {}))
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        assert isinstance(driver, aiosqlite.Connection)
        # aiosqlite runs each call in its own thread, one round trip each; its
        # `_execute` runs one function there (as SQLAlchemy's adapter does for
        # the isolation level): every statement in one round trip.
        failed: list[str] = []
        try:
            if not (here and _executemany_here(driver._conn, statements, failed)):
                await driver._execute(  # type: ignore[no-untyped-call]
                    sqlite_statements.execute_all, driver._conn, statements, failed, commit
                )
        except sqlite3.Error as exc:
            raise DBAPIError.instance(
                failed[0] if failed else CLAIM_STATEMENT,
                None,
                exc,
                sqlite3.Error,
                dialect=connection.dialect,
            ) from exc

    async def _postgres(self, connection: AsyncConnection, commit: bool) -> None:
        if any(isinstance(step, _Encoded) for step in self._steps):
            raise NotImplementedError("rows encoded for SQLite cannot go to PostgreSQL")
        sent: list[_Sent | _Copy | None] = []
        for step in self._steps:
            if isinstance(step, _Insert):
                batch = None if step.by_copy else _batch_json(step.layout, step.rows)
                if batch is None:
                    # Encoded before anything is sent: a row that cannot be stored sends nothing.
                    sent.append(_Copy(step.layout, _encode(step.layout, step.rows, sqlite=False)))
                else:
                    sent.append(_Sent(step.layout.json_sql, (batch,)))
            elif isinstance(step, _PostgresEncoded):
                batch = step.json_batch()
                sent.append(
                    _Copy(step.layout, step.copied())
                    if batch is None
                    else _Sent(step.layout.json_sql, (batch,))
                )
            elif isinstance(step, _PostgresTuples):
                sent.append(_Copy(step.layout, step.values))
            elif isinstance(step, _Finish):
                if len(step.ends) <= _FINISH_BY_ROW_MAX:
                    sent.append(_Sent(_FINISH_POSTGRES_ROWS, _end_parameters(step.ends), many=True))
                    continue
                batch = _ends_json(step.ends)
                ids = [end["run_id"] for end in step.ends]
                sent.append(
                    None if batch is None else _Sent(_FINISH_POSTGRES, (batch, ids), prepare=False)
                )
            elif isinstance(step, _Claim):
                keys = _batch_json(_layout_of(IdempotencyKey), step.key_rows)
                runs = _batch_json(_layout_of(Run), step.run_rows)
                sent.append(
                    None
                    if keys is None or runs is None
                    else _Sent(_claim_postgres(), (keys, runs), won=step.won)
                )
            elif isinstance(step, _Release):
                sent.append(_Sent(_RELEASE_POSTGRES, _releases(step.rows), many=True))
            elif isinstance(step, _Complete):
                sent.append(_Sent(_COMPLETE_POSTGRES, _completions(step.rows), many=True))
        if any(item is None for item in sent):
            # A step needs per-row parameters: one statement at a time.
            for step in self._steps:
                if isinstance(step, _Insert):
                    await _postgres(connection, step.layout, step.rows)
                elif isinstance(step, _PostgresEncoded):
                    batch = step.json_batch()
                    copied = step.copied() if batch is None else None
                    await _postgres_insert(connection, step.layout, batch, copied)
                elif isinstance(step, _PostgresTuples):
                    await _postgres_insert(connection, step.layout, None, step.values)
                elif isinstance(step, _Finish):
                    await _postgres_ends(connection, step.ends)
                elif isinstance(step, _Claim):
                    await _postgres_claims(connection, step)
                elif isinstance(step, _Release):
                    await _postgres_rows(connection, _RELEASE_POSTGRES, _releases(step.rows))
                elif isinstance(step, _Complete):
                    await _postgres_rows(connection, _COMPLETE_POSTGRES, _completions(step.rows))
            if commit:
                await _postgres_commit(connection)
            return
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        assert isinstance(driver, psycopg.AsyncConnection)
        statement = ""
        # The claims' statement returns the runs it inserted: a cursor of its own,
        # read once the pipeline has synced.
        claims: list[tuple[psycopg.AsyncCursor[Any], set[str]]] = []
        # A whole transaction of its own is sent as BEGIN, the statements and COMMIT:
        # without COPY, in one pipeline synced once (one round trip); each COPY
        # splits it, costing two more. psycopg's own transaction would cost
        # two more (it syncs after its implicit BEGIN, and the pipeline syncs again
        # after a `commit()`), so the connection is in autocommit meanwhile.
        own = commit and driver.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if own and not any(isinstance(item, _Copy) for item in sent):
            items = cast(list[_Sent], sent)
            whole = _whole_query(driver, items)
            if whole is not None:
                await _send_whole(connection, raw, driver, items, *whole)
                return
        segments = _segments(sent)
        try:
            if own:
                await driver.set_autocommit(True)
            for position, segment in enumerate(segments):
                first, last = position == 0, position == len(segments) - 1
                if isinstance(segment, _Copy):
                    statement = segment.layout.copy_sql
                    await _copy(driver, segment.layout, segment.encoded)
                    if last and commit:
                        statement = "COMMIT"
                        if own:
                            await driver.execute("COMMIT")
                        else:
                            await driver.commit()
                    continue
                if not segment and not (own and first) and not (commit and last):
                    continue
                async with driver.pipeline(), driver.cursor() as cursor:
                    if own and first:
                        await cursor.execute("BEGIN")
                    for item in segment:
                        statement = item.statement
                        if item.many:
                            await cursor.executemany(statement, item.parameters)
                        elif item.won is None:
                            await cursor.execute(statement, item.parameters, prepare=item.prepare)
                        else:
                            claimed = driver.cursor()
                            await claimed.execute(statement, item.parameters)
                            claims.append((claimed, item.won))
                    if commit and last:
                        statement = "COMMIT"
                        if own:
                            await cursor.execute("COMMIT")
                        else:
                            await driver.commit()  # in the pipeline: the same round trip
            for claimed, won in claims:
                won.update(row[0] for row in await claimed.fetchall())
        except psycopg.Error as exc:
            await _raise_postgres(connection, raw, statement, exc)
        finally:
            for claimed, _ in claims:
                await claimed.close()
            if own:
                await _end_own_transaction(connection, driver)


def _whole_query(
    driver: psycopg.AsyncConnection[Any], sent: Sequence[_Sent]
) -> tuple[bytes, list[tuple[int, set[str]]]] | None:
    """A transaction of statements without COPY as one simple query, its parameters
    written in as literals (`app.store.postgres_literals`): (the query, the
    claims' statements by position with where their returned ids go); None
    when a value is not written so.

    The server runs a query of several statements as one transaction, committed
    once the last succeeds and rolled back whole when one fails; psycopg then
    reads one result per statement and skips the pipeline's machinery (about
    10 µs of the loop per run in a batch, section 4, eighteenth round). The
    server plans each statement again, as it does those sent unprepared."""
    try:
        literals = Literals(driver.pgconn)
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
    driver: psycopg.AsyncConnection[Any],
    sent: Sequence[_Sent],
    query: bytes,
    claims: Sequence[tuple[int, set[str]]],
) -> None:
    """Run `_whole_query`'s query in autocommit (no BEGIN of psycopg's: the query is
    its own transaction) and read the ids the claims returned."""
    try:
        await driver.set_autocommit(True)
        async with driver.cursor() as cursor:
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
        await _raise_postgres(connection, raw, named, exc)
    finally:
        await _end_own_transaction(connection, driver)


def _gone(exc: WriterProcessGone, error: type[Exception], base: type[Exception]) -> StatementError:
    """A writer process that ended, as the driver's error for a dropped connection."""
    return DBAPIError.instance("COMMIT", None, error(str(exc)), base, connection_invalidated=True)


def _committed(connection: AsyncConnection) -> None:
    """Listeners of SQLAlchemy's `commit` event (commit counters) still see a commit
    the driver made itself."""
    sync = connection.sync_connection
    if sync is not None:
        sync.dispatch.commit(sync)


def _segments(sent: Sequence[_Sent | _Copy | None]) -> list[list[_Sent] | _Copy]:
    """The statements in order: runs of pipelined ones, each COPY on its own. A
    transaction of its own starts with a pipeline, so that BEGIN costs no round
    trip of its own (it may hold BEGIN alone, before a COPY)."""
    segments: list[list[_Sent] | _Copy] = [[]]
    for item in sent:
        assert item is not None
        if isinstance(item, _Copy):
            segments.append(item)
        elif isinstance(segments[-1], list):
            segments[-1].append(item)
        else:
            segments.append([item])
    return segments


async def _copy(
    driver: psycopg.AsyncConnection[Any], layout: _Layout, encoded: Sequence[tuple[Any, ...]]
) -> None:
    async with driver.cursor() as cursor, cursor.copy(layout.copy_sql) as copy:
        copy.set_types(layout.copy_types)
        for row in encoded:
            await copy.write_row(row)


@dataclass(frozen=True, slots=True)
class _Copy:
    """One table's rows for a binary COPY, encoded as its driver tuples."""

    layout: _Layout
    encoded: Sequence[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class _Sent:
    """One statement of a PostgreSQL pipeline: `parameters` once, or each of them
    (`many`, for a few rows each found by its primary key); `prepare` False: planned
    at every execution; `won`: the claims' statement, whose returned ids go there."""

    statement: str
    parameters: Sequence[Any]
    prepare: bool | None = None
    won: set[str] | None = None
    many: bool = False


def _executemany_here(
    conn: sqlite3.Connection, statements: Sequence[SqliteStatement], failed: list[str]
) -> bool:
    """`_executemany_all` with its commit on the calling thread, never waiting for
    another connection's lock: False, with the transaction rolled back and nothing
    written, when one holds it (the caller then goes through aiosqlite's thread,
    which waits as long as the connection's busy timeout says).

    The connection is the caller's alone while it runs: the pool gave it to the
    caller, whose every earlier call on it has returned, and it was opened with
    `check_same_thread=False` (`app.store.database`)."""
    patience = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        sqlite_statements.execute_all(conn, statements, failed, True)
    except sqlite3.OperationalError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
        if code not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise
        for statement in statements:
            if isinstance(statement, SqliteClaims):
                statement.won.clear()  # claimed in the transaction rolled back
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(patience)}")
    return True


def _completions(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            row["state"],
            row["response_status"],
            dumps(row["response_body"]),
            row["run_id"],
            row["caller"],
            row["key"],
        )
        for row in rows
    ]


def _releases(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [(row["caller"], row["key"], row["run_id"]) for row in rows]


def _sqlite_ends(
    ends: Sequence[Mapping[str, Any]], rendered: RenderedTimes
) -> list[tuple[Any, ...]]:
    encoded = []
    for end in ends:
        outcome = end.get("outcome")
        encoded.append(
            (
                end["status"],
                None if outcome is None else dumps(outcome),
                end.get("call_count"),
                sqlite_time(end["finished_at"], rendered),
                end["run_id"],
            )
        )
    return encoded


def _end_values(end: Mapping[str, Any]) -> dict[str, Any]:
    finished_at = end["finished_at"]
    if finished_at.tzinfo is None:
        raise ValueError(f"naive datetime {finished_at.isoformat()} cannot be stored; use UTC")
    return {
        "run_id": end["run_id"],
        "status": end["status"],
        "outcome": end.get("outcome"),
        "call_count": end.get("call_count"),
        "finished_at": finished_at,
    }


def _ends_json(ends: Sequence[Mapping[str, Any]]) -> str | None:
    """The ends as one JSON array, or None when this path cannot take them (as `_batch_json`)."""
    try:
        batch = json_bytes([_end_values(end) for end in ends]).decode()
    except TypeError:
        return None
    return None if "\\u0000" in batch else batch


def _end_parameters(ends: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """`_FINISH_POSTGRES_ROWS`'s parameters, one tuple per end."""
    rows = []
    for end in ends:
        values = _end_values(end)
        outcome = values["outcome"]
        rows.append(
            (
                values["status"],
                None if outcome is None else dumps(outcome),
                values["call_count"],
                values["finished_at"],
                values["run_id"],
            )
        )
    return rows


async def _postgres_ends(connection: AsyncConnection, ends: Sequence[Mapping[str, Any]]) -> None:
    await _postgres_rows(connection, _FINISH_POSTGRES_ROWS, _end_parameters(ends))


async def _postgres_claims(connection: AsyncConnection, claims: _Claim) -> None:
    """`_Claim` one key at a time with per-row parameters (rows JSON cannot carry)."""
    keys = _layout_of(IdempotencyKey)
    json_columns = {index for index, _ in keys.json}
    placeholders = ", ".join(
        "%s::json" if index in json_columns else "%s" for index in range(len(keys.columns))
    )
    quoted = ", ".join(f'"{name}"' for name in keys.columns)
    statement = (
        f'INSERT INTO "idempotency_keys" ({quoted}) VALUES ({placeholders}) '
        f'{_claim_sets("idempotency_keys")} RETURNING "run_id"'
    )
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, psycopg.AsyncConnection)
    inserted = []
    try:
        async with driver.cursor() as cursor:
            for key, run in zip(
                _encode(keys, claims.key_rows, sqlite=False), claims.run_rows, strict=True
            ):
                await cursor.execute(statement, key)
                if await cursor.fetchone() is not None:
                    inserted.append(run)
    except psycopg.Error as exc:
        await _raise_postgres(connection, raw, statement, exc)
    if inserted:
        await _postgres(connection, _layout_of(Run), inserted)
    claims.won.update(run["id"] for run in inserted)


async def _postgres_rows(
    connection: AsyncConnection, statement: str, rows: Sequence[tuple[Any, ...]]
) -> None:
    """`statement` once per row of parameters (`executemany`)."""
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, psycopg.AsyncConnection)
    try:
        async with driver.cursor() as cursor:
            await cursor.executemany(statement, rows)
    except psycopg.Error as exc:
        await _raise_postgres(connection, raw, statement, exc)


async def _postgres_commit(connection: AsyncConnection) -> None:
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, psycopg.AsyncConnection)
    try:
        await driver.commit()
    except psycopg.Error as exc:
        await _raise_postgres(connection, raw, "COMMIT", exc)


async def _end_own_transaction(
    connection: AsyncConnection, driver: psycopg.AsyncConnection
) -> None:
    """After a transaction sent whole in autocommit: roll back what a failed statement
    left open (the server skipped the rest, COMMIT included; nothing when it
    committed), and put the connection out of autocommit again; a connection that
    cannot be put back is never reused."""
    try:
        # `rollback()`, not a ROLLBACK statement: psycopg then also forgets the
        # statements it prepared in the transaction.
        await driver.rollback()
        await driver.set_autocommit(False)
    except psycopg.Error as exc:
        if not connection.invalidated:
            await connection.invalidate(exc)


async def _raise_postgres(
    connection: AsyncConnection, raw: Any, statement: str, exc: psycopg.Error
) -> NoReturn:
    disconnected = connection.dialect.is_disconnect(cast(Any, exc), raw.dbapi_connection, None)
    if disconnected:
        await connection.invalidate(exc)
    raise DBAPIError.instance(
        statement,
        None,
        exc,
        psycopg.Error,
        connection_invalidated=disconnected,
        dialect=connection.dialect,
    ) from exc
