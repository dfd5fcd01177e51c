"""How the journal's rows become driver values: one owner of the tables' layouts.

Each table the journal writes has a `Layout`: its columns in the order of its
driver tuples, which of them hold JSON documents or datetimes, and the
statements that insert it. Receipts and audit rows are also made straight from
the engine's objects into driver tuples (`app.store.journal.records`,
`app.store.journal.events`); their column order is defined here once
(`RECEIPT_COLUMNS`, `AUDIT_COLUMNS`) and their layouts follow it.

Values are encoded exactly as the column types would encode them (JSON text from
`app.foundation.serialization.dumps`; on SQLite, datetimes as naive UTC text in
SQLAlchemy's storage format), so a row reads back identically whichever path
wrote it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import JSON, BigInteger, Boolean, ColumnDefault, Float, Integer, String, Table

from app.foundation.serialization import dumps
from app.store.models import AuditEvent, Base, IdempotencyKey, Receipt
from app.store.types import UtcDateTime

# The receipts' driver tuples, column for column (`records.receipt_values` makes
# all but the last, which a batch's receipts share; its chain columns are None
# until the batch is linked, `app.store.journal.chain`).
RECEIPT_COLUMNS = (
    *("id", "run_id", "seq", "call_key", "item_key", "parallel_batch_id", "tool", "owner"),
    *("status", "output", "output_digest", "output_truncated", "error", "attempts"),
    *("cache_hit", "cache_source_receipt_id", "fingerprint", "idempotency_key"),
    *("parent_receipt_id", "control", "admission_wait_ms", "started_at", "finished_at"),
    *("duration_ms", "chain_seq", "chain_link", "created_at"),
)
# The audit rows' driver tuples (`events.audit_event_values`); the id is the database's.
AUDIT_COLUMNS = (
    *("run_id", "at", "kind", "caller", "tool", "call_key", "item_key", "detail"),
    *("chain_seq", "chain_link"),
)
_ORDERS = {Receipt.__tablename__: RECEIPT_COLUMNS, AuditEvent.__tablename__: AUDIT_COLUMNS}


@dataclass(frozen=True, slots=True)
class Layout:
    """How one table's rows become driver tuples."""

    table: str
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


_layouts: dict[str, Layout] = {}


def layout_of(model: type[Base]) -> Layout:
    table = cast(Table, model.__table__)
    layout = _layouts.get(table.name)
    if layout is None:
        layout = _layouts[table.name] = _build_layout(table)
    return layout


def _build_layout(table: Table) -> Layout:
    order = _ORDERS.get(table.name)
    if order is None:
        # An autoincrementing integer key is left to the database.
        auto = table.autoincrement_column
        columns = [column for column in table.columns if column is not auto]
    else:
        columns = [table.columns[name] for name in order]
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
    return Layout(
        table=table.name,
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


def complete(layout: Layout, row: Mapping[str, Any]) -> dict[str, Any]:
    """The row with the column defaults filled in for the keys it leaves out."""
    full = dict(row)
    for name, default in layout.defaults:
        if name not in full:
            value = default()
            if value is _MISSING:
                raise KeyError(f"row for a bulk insert has no value for column {name!r}")
            full[name] = value
    return full


def aware(value: datetime) -> datetime:
    """`value`, which must carry its time zone: a naive datetime is refused before
    anything is sent (the driver's own error would not say why)."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value.isoformat()} cannot be stored; use UTC")
    return value


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


# Datetimes rendered for SQLite, by `id` (the datetime kept beside its text, so a
# recycled id is never taken for it).
RenderedTimes = dict[int, tuple[datetime, str]]


def sqlite_time(value: datetime, rendered: RenderedTimes) -> str:
    """`value` as SQLite stores it (`_sqlite_time`), rendered once per `rendered`."""
    seen = rendered.get(id(value))
    if seen is None or seen[0] is not value:
        seen = rendered[id(value)] = (value, _sqlite_time(value))
    return seen[1]


def encode(
    layout: Layout, rows: Sequence[Mapping[str, Any]], rendered: RenderedTimes | None = None
) -> list[tuple[Any, ...]]:
    """The rows as SQLite's driver takes them (datetimes rendered into `rendered`)
    or, with `rendered` None, PostgreSQL's (datetimes aware)."""
    values = layout.values
    json = layout.json
    sqlite = rendered is not None
    times = layout.times
    encoded = []
    for row in rows:
        try:
            items = list(values(row))
        except KeyError:
            items = list(values(complete(layout, row)))
        for index, none_is_null in json:
            value = items[index]
            if value is not None or not none_is_null:
                items[index] = dumps(value)
        for index in times:
            value = items[index]
            if value is None:
                continue
            if sqlite:
                items[index] = sqlite_time(value, cast(RenderedTimes, rendered))
            else:
                aware(value)
        encoded.append(tuple(items))
    return encoded


def claim_sets(table: str) -> str:
    """How a claim takes an idempotency key: when it is new, or when the stored one
    has expired (it is then taken over in place); a key held by another request
    is left as it is. The claim's `created_at` is "now"."""
    columns = [name for name in layout_of(IdempotencyKey).columns if name not in ("caller", "key")]
    assignments = ", ".join(f'"{name}" = excluded."{name}"' for name in columns)
    return (
        f'ON CONFLICT ("caller", "key") DO UPDATE SET {assignments} '
        f'WHERE "{table}"."expires_at" <= excluded."created_at"'
    )


def completion_values(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Claimed keys' final responses as both databases' statements take them:
    (state, status, body, run id or None to keep the stored one, caller, key)."""
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


def release_values(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Keys to free, each only while the run that claimed it still holds it."""
    return [(row["caller"], row["key"], row["run_id"]) for row in rows]
