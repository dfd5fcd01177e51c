"""A batch's rows as PostgreSQL takes them: one step per table, each able to go
in a pipeline, alone, or to the writer process.

An insert goes as one `INSERT ... SELECT ... FROM json_populate_recordset(...)`
whose only parameter is the whole batch as one JSON array, written by orjson in
C: the server parses and inserts it on its own core, and Python does almost
nothing per row. From `COPY_MIN_ROWS` rows, a table's rows go by binary `COPY`
instead: psycopg writes each value in C and the server no longer parses a JSON
object per row; the batch then costs a few round trips more, which that many
rows pay for. `COPY` also takes the batches the JSON path cannot: an integer
beyond 64 bits, or a NUL character, in a JSON document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Protocol

import psycopg
from orjson import Fragment
from sqlalchemy.ext.asyncio import AsyncConnection

from app.foundation.serialization import dumps, json_bytes
from app.store.journal.postgres import driver
from app.store.journal.postgres import statements as program
from app.store.journal.rows import (
    Layout,
    aware,
    claim_sets,
    complete,
    completion_values,
    encode,
    layout_of,
    release_values,
)
from app.store.models import IdempotencyKey, Run

# From this many rows of one table, PostgreSQL takes them by binary COPY rather
# than as a JSON batch in the pipeline.
COPY_MIN_ROWS = 256

# A run's end (a None `call_count` keeps the stored count): one UPDATE joined to
# the batch as a JSON record set. The planner takes any set-returning function
# for 100 rows and so joined the whole `runs` table by a sequential scan (a cost
# growing with every run ever stored); the ids, passed again as an array, let it
# find the rows through the primary key instead. It is planned at every
# execution, never prepared: a plan kept from when `runs` was nearly empty (a
# new database) scans it whole until an analyze replaces it (never, with
# autovacuum off), every batch longer than the last.
FINISH = (
    'UPDATE "runs" SET "status" = e.status, "outcome" = e.outcome, '
    '"call_count" = coalesce(e.call_count, "runs"."call_count"), "finished_at" = e.finished_at '
    "FROM json_to_recordset(%s::json) AS e(run_id text, status text, outcome json, "
    "call_count integer, finished_at timestamptz) "
    'WHERE "runs"."id" = e.run_id AND "runs"."id" = ANY(%s::text[])'
)
FINISH_ROWS = (
    'UPDATE "runs" SET "status" = %s, "outcome" = %s::json, '
    '"call_count" = coalesce(%s, "call_count"), "finished_at" = %s WHERE "id" = %s'
)
# Up to this many ends, they go one row at a time, each found by its primary key
# through a prepared statement: the joined statement's planning costs more than
# a few rows do.
FINISH_BY_ROW_MAX = 8
# A claimed key's final response; a None `run_id` keeps the stored one. One
# statement per key (a batch holds a few, one per run ending in it), each found
# through the primary key, for the reason the ends give.
COMPLETE = (
    'UPDATE "idempotency_keys" SET "state" = %s, "response_status" = %s, '
    '"response_body" = %s::json, "run_id" = coalesce(%s, "run_id") '
    'WHERE "caller" = %s AND "key" = %s'
)
# Keys freed (a claim whose request was answered with a server error after all).
RELEASE = 'DELETE FROM "idempotency_keys" WHERE "caller" = %s AND "key" = %s AND "run_id" = %s'


@dataclass(frozen=True, slots=True)
class Copy:
    """One table's rows for a binary COPY, encoded as its driver tuples."""

    layout: Layout
    encoded: Sequence[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Sent:
    """One statement of a pipeline: `parameters` once, or each of them (`many`, for a
    few rows each found by its primary key); `prepare` False: planned at every
    execution; `won`: the claims' statement, whose returned ids go there."""

    statement: str
    parameters: Sequence[Any]
    prepare: bool | None = None
    won: set[str] | None = None
    many: bool = False


class Step(Protocol):
    """One table's part of a batch."""

    def sent(self) -> Sent | Copy | None:
        """In a pipeline; None when the rows need a statement each (`one_by_one`)."""

    async def one_by_one(self, connection: AsyncConnection) -> None:
        """In the connection's transaction, with per-row parameters where needed."""

    def operation(self) -> tuple[Any, ...]:
        """As the writer process takes it (`app.store.journal.postgres.statements`)."""


def _least(copy_min_rows: int | None) -> int:
    return COPY_MIN_ROWS if copy_min_rows is None else copy_min_rows


def batch_json(layout: Layout, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The rows as one JSON array of objects, or None when this path cannot take them.

    A key the row leaves out would be NULL, not the column default: such rows
    are completed first. orjson writes JSON documents compactly, exactly as
    `serialization.dumps` does, and PostgreSQL's `json` type keeps that text;
    `None` in a JSON column becomes SQL NULL (`json_populate_recordset` maps
    JSON null so), which is what the nullable JSON columns store for it.
    """
    keys = layout.keys
    whole = [row if row.keys() == keys else complete(layout, row) for row in rows]
    times = [layout.columns[index] for index in layout.times]
    for row in whole:
        for name in times:
            if row[name] is not None:
                aware(row[name])
    try:
        batch = json_bytes(whole)
    except TypeError:  # an integer beyond 64 bits
        return None
    return _without_nul(batch)


def _without_nul(batch: bytes) -> str | None:
    """The batch as text, or None when it holds an escaped NUL.

    json_populate_recordset unescapes every string, and PostgreSQL text cannot
    hold NUL: a document holding one (which the `json` type stores) goes by COPY.
    Only an escape writes one: a batch without a backslash (most) is not searched
    for it."""
    if b"\\" in batch and b"\\u0000" in batch:
        return None
    return batch.decode()


@dataclass(frozen=True, slots=True)
class Insert:
    """Rows (column names as keys; missing ones take the column default)."""

    layout: Layout
    rows: Sequence[Mapping[str, Any]]
    copy_min_rows: int | None = None  # None: `COPY_MIN_ROWS`

    def sent(self) -> Sent | Copy:
        by_copy = len(self.rows) >= _least(self.copy_min_rows)
        batch = None if by_copy else batch_json(self.layout, self.rows)
        if batch is None:
            # Encoded before anything is sent: a row that cannot be stored sends nothing.
            return Copy(self.layout, encode(self.layout, self.rows))
        return Sent(self.layout.json_sql, (batch,))

    async def one_by_one(self, connection: AsyncConnection) -> None:
        item = self.sent()
        if isinstance(item, Copy):
            await driver.insert(connection, self.layout, None, item.encoded)
        else:
            await driver.insert(connection, self.layout, item.parameters[0], None)

    def operation(self) -> tuple[Any, ...]:
        layout = self.layout
        return (program.COPY, layout.copy_sql, layout.copy_types, encode(layout, self.rows))


@dataclass(frozen=True, slots=True)
class Encoded:
    """Rows already in the driver's form but for their last column, which they share
    (receipts: `records.receipt_values`)."""

    layout: Layout
    values: Sequence[tuple[Any, ...]]
    last: datetime
    copy_min_rows: int | None = None  # None: `COPY_MIN_ROWS`

    def json_batch(self) -> str | None:
        """`batch_json` of the rows: their JSON documents, already written, taken in as
        they are; None when they go by COPY."""
        if len(self.values) >= _least(self.copy_min_rows):
            return None
        columns = self.layout.columns
        last = columns[-1]
        documents = [(index, columns[index]) for index, _ in self.layout.json]
        rows = []
        for row_values in self.values:
            row = dict(zip(columns, row_values, strict=False))  # all but the last
            row[last] = self.last
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

    def copied(self) -> list[tuple[Any, ...]]:
        """The rows whole, for COPY."""
        last = (self.last,)
        return [values + last for values in self.values]

    def sent(self) -> Sent | Copy:
        batch = self.json_batch()
        if batch is None:
            return Copy(self.layout, self.copied())
        return Sent(self.layout.json_sql, (batch,))

    async def one_by_one(self, connection: AsyncConnection) -> None:
        batch = self.json_batch()
        await driver.insert(
            connection, self.layout, batch, None if batch is not None else self.copied()
        )

    def operation(self) -> tuple[Any, ...]:
        layout = self.layout
        return (program.COPY, layout.copy_sql, layout.copy_types, self.copied())


@dataclass(frozen=True, slots=True)
class Tuples:
    """Rows already in the driver's form (audit rows: `events.audit_event_values`),
    always by COPY."""

    layout: Layout
    values: Sequence[tuple[Any, ...]]

    def sent(self) -> Copy:
        return Copy(self.layout, self.values)

    async def one_by_one(self, connection: AsyncConnection) -> None:
        await driver.insert(connection, self.layout, None, self.values)

    def operation(self) -> tuple[Any, ...]:
        layout = self.layout
        return (program.COPY, layout.copy_sql, layout.copy_types, self.values)


@dataclass(frozen=True, slots=True)
class Ends:
    ends: Sequence[Mapping[str, Any]]

    def sent(self) -> Sent | None:
        if len(self.ends) <= FINISH_BY_ROW_MAX:
            return Sent(FINISH_ROWS, end_parameters(self.ends), many=True)
        try:
            batch = json_bytes([_end_values(end) for end in self.ends]).decode()
        except TypeError:
            return None
        if "\\u0000" in batch:
            return None
        return Sent(FINISH, (batch, [end["run_id"] for end in self.ends]), prepare=False)

    async def one_by_one(self, connection: AsyncConnection) -> None:
        await driver.execute_rows(connection, FINISH_ROWS, end_parameters(self.ends))

    def operation(self) -> tuple[Any, ...]:
        return (program.MANY, FINISH_ROWS, end_parameters(self.ends))


def _end_values(end: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": end["run_id"],
        "status": end["status"],
        "outcome": end.get("outcome"),
        "call_count": end.get("call_count"),
        "finished_at": aware(end["finished_at"]),
    }


def end_parameters(ends: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """`FINISH_ROWS`'s parameters, one tuple per end."""
    rows = []
    for end in ends:
        outcome = end.get("outcome")
        rows.append(
            (
                end["status"],
                None if outcome is None else dumps(outcome),
                end.get("call_count"),
                aware(end["finished_at"]),
                end["run_id"],
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class Keyed:
    """A statement per idempotency key (its response stored, or the key freed)."""

    statement: str
    values: Sequence[tuple[Any, ...]]

    def sent(self) -> Sent:
        return Sent(self.statement, self.values, many=True)

    async def one_by_one(self, connection: AsyncConnection) -> None:
        await driver.execute_rows(connection, self.statement, self.values)

    def operation(self) -> tuple[Any, ...]:
        return (program.MANY, self.statement, self.values)


def completions(rows: Sequence[Mapping[str, Any]]) -> Keyed:
    return Keyed(COMPLETE, completion_values(rows))


def releases(rows: Sequence[Mapping[str, Any]]) -> Keyed:
    return Keyed(RELEASE, release_values(rows))


@dataclass(frozen=True, slots=True)
class Claims:
    """Keys to claim, each with the run it starts; the runs whose key was claimed
    are added to `won`."""

    key_rows: Sequence[Mapping[str, Any]]
    run_rows: Sequence[Mapping[str, Any]]
    won: set[str]

    def sent(self) -> Sent | None:
        keys = batch_json(layout_of(IdempotencyKey), self.key_rows)
        runs = batch_json(layout_of(Run), self.run_rows)
        if keys is None or runs is None:
            return None
        return Sent(_claim_sql(), (keys, runs), won=self.won)

    async def one_by_one(self, connection: AsyncConnection) -> None:
        """One key at a time with per-row parameters (rows JSON cannot carry)."""
        keys = layout_of(IdempotencyKey)
        json_columns = {index for index, _ in keys.json}
        placeholders = ", ".join(
            "%s::json" if index in json_columns else "%s" for index in range(len(keys.columns))
        )
        quoted = ", ".join(f'"{name}"' for name in keys.columns)
        statement = (
            f'INSERT INTO "idempotency_keys" ({quoted}) VALUES ({placeholders}) '
            f'{claim_sets("idempotency_keys")} RETURNING "run_id"'
        )
        raw, psycopg_connection = await driver.driver_of(connection)
        inserted = []
        try:
            async with psycopg_connection.cursor() as cursor:
                for key, run in zip(encode(keys, self.key_rows), self.run_rows, strict=True):
                    await cursor.execute(statement, key)
                    if await cursor.fetchone() is not None:
                        inserted.append(run)
        except psycopg.Error as exc:
            await driver.raise_postgres(connection, raw, statement, exc)
        if inserted:
            await Insert(layout_of(Run), inserted).one_by_one(connection)
        self.won.update(run["id"] for run in inserted)

    def operation(self) -> tuple[Any, ...]:
        """The batch's keys in one statement, as JSON, or, when JSON cannot take
        them, one statement per key."""
        keys = batch_json(layout_of(IdempotencyKey), self.key_rows)
        runs = batch_json(layout_of(Run), self.run_rows)
        if keys is not None and runs is not None:
            return (program.CLAIM, _claim_sql(), [(keys, runs)])
        key_values = encode(layout_of(IdempotencyKey), self.key_rows)
        run_values = encode(layout_of(Run), self.run_rows)
        rows = [key + run for key, run in zip(key_values, run_values, strict=True)]
        return (program.CLAIM, _claim_row_sql(), rows)


@cache
def _claim_sql() -> str:
    keys, runs = layout_of(IdempotencyKey), layout_of(Run)
    quoted = ", ".join(f'"{name}"' for name in runs.columns)
    selected = ", ".join(f'r."{name}"' for name in runs.columns)
    return (
        f'WITH claimed AS ({keys.json_sql} {claim_sets("idempotency_keys")} RETURNING "run_id") '
        f'INSERT INTO "runs" ({quoted}) SELECT {selected} '
        'FROM json_populate_recordset(NULL::"runs", %s::json) AS r '
        'WHERE r."id" IN (SELECT "run_id" FROM claimed) RETURNING "id"'
    )


@cache
def _claim_row_sql() -> str:
    """The writer process's claim of one key: the key's values, then its run's, which
    is inserted only when the key was claimed, and whose id is then returned."""
    keys, runs = layout_of(IdempotencyKey), layout_of(Run)
    quoted = ", ".join(f'"{name}"' for name in runs.columns)
    json = {index for index, _ in runs.json}
    typed = ", ".join(
        f"%s::{'json' if index in json else kind}" for index, kind in enumerate(runs.copy_types)
    )
    values_sql = keys.insert_sql.replace("?", "%s")
    return (
        f"WITH claimed AS ({values_sql} {claim_sets('idempotency_keys')} "
        f'RETURNING "run_id") INSERT INTO "runs" ({quoted}) SELECT {typed} FROM claimed '
        'RETURNING "id"'
    )
