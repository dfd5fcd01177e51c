"""Rows as the chain and the bundle hold them: times as RFC 3339 UTC text, the rest as read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from app.foundation.chain import rfc3339


def stored_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            column: rfc3339(value) if isinstance(value, datetime) else value
            for column, value in row.items()
        }
        for row in rows
    ]
