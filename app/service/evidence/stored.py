"""Rows as the chain and the bundle hold them: times as RFC 3339 UTC text, the rest as read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.foundation.chain import stored_value


def stored_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{column: stored_value(value) for column, value in row.items()} for row in rows]
