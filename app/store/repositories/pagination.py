"""Keyset pagination, newest first, over `(created_at, id)`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, tuple_
from sqlalchemy.orm import InstrumentedAttribute

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Keyset:
    """The position of the last item of a page; the next page starts after it."""

    created_at: datetime
    id: str


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next: Keyset | None


def newest_first(
    statement: Select[Any],
    created_at: InstrumentedAttribute[datetime],
    id_: InstrumentedAttribute[str],
    *,
    limit: int,
    after: Keyset | None,
) -> Select[Any]:
    """Order newest first, start after `after`, and fetch one extra row to detect a next page."""
    if after is not None:
        position: ColumnElement[bool] = tuple_(created_at, id_) < tuple_(
            after.created_at, after.id, types=[created_at.type, id_.type]
        )
        statement = statement.where(position)
    return statement.order_by(created_at.desc(), id_.desc()).limit(limit + 1)


def created_within(
    statement: Select[Any],
    created_at: InstrumentedAttribute[datetime],
    *,
    since: datetime | None,
    until: datetime | None,
) -> Select[Any]:
    """Keep rows created at or after `since` and strictly before `until`."""
    if since is not None:
        statement = statement.where(created_at >= since)
    if until is not None:
        statement = statement.where(created_at < until)
    return statement


def to_page(rows: Sequence[T], limit: int, keyset: Callable[[T], Keyset]) -> Page[T]:
    items = list(rows[:limit])
    if len(rows) <= limit or not items:
        return Page(items=items, next=None)
    return Page(items=items, next=keyset(items[-1]))
