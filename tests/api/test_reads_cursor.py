from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.api.pagination import (
    keyset_cursor,
    parse_keyset_cursor,
    parse_position_cursor,
    position_cursor,
)
from app.service.errors import InvalidRequest
from app.service.runs.reads import Keyset


def _raw(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_keyset_cursor_round_trips_to_the_microsecond() -> None:
    keyset = Keyset(datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC), "r-1")

    cursor = keyset_cursor("receipts", keyset)

    assert parse_keyset_cursor("receipts", cursor) == keyset
    assert parse_keyset_cursor("receipts", None) is None
    assert cursor.isascii()
    assert "=" not in cursor


def test_a_cursor_in_another_offset_names_the_same_instant() -> None:
    local = datetime(2026, 3, 1, 10, 0, tzinfo=timezone(timedelta(hours=1)))

    keyset = parse_keyset_cursor("runs", keyset_cursor("runs", Keyset(local, "x")))

    assert keyset == Keyset(datetime(2026, 3, 1, 9, 0, tzinfo=UTC), "x")
    assert keyset is not None
    assert keyset.created_at.tzinfo is UTC


def test_a_position_cursor_round_trips() -> None:
    assert parse_position_cursor("run-audit", position_cursor("run-audit", 41), maximum=99) == 41
    assert parse_position_cursor("run-audit", position_cursor("run-audit", 0), maximum=99) == 0
    assert parse_position_cursor("run-audit", None, maximum=99) is None


BAD_KEYSET_CURSORS = {
    "empty": "",
    "not base64": "!!!!",
    "one stray char": "a",
    "padding kept": keyset_cursor("runs", Keyset(datetime(2026, 1, 1, tzinfo=UTC), "ab")) + "==",
    "not json": _raw(b"\xff\xfe"),
    "json list": _raw("[1,2]"),
    "another listing": keyset_cursor("receipts", Keyset(datetime(2026, 1, 1, tzinfo=UTC), "a")),
    "a position cursor": position_cursor("runs", 3),
    "missing id": _raw('{"l":"runs","t":"2026-01-01T00:00:00+00:00"}'),
    "extra field": _raw('{"l":"runs","t":"2026-01-01T00:00:00+00:00","i":"a","x":1}'),
    "whitespace": _raw('{"l": "runs","t":"2026-01-01T00:00:00+00:00","i":"a"}'),
    "naive time": _raw('{"l":"runs","t":"2026-01-01T00:00:00","i":"a"}'),
    "not a time": _raw('{"l":"runs","t":"yesterday","i":"a"}'),
    "time as number": _raw('{"l":"runs","t":1767225600,"i":"a"}'),
    "overflowing time": _raw('{"l":"runs","t":"0001-01-01T00:00:00+05:00","i":"a"}'),
    "id as number": _raw('{"l":"runs","t":"2026-01-01T00:00:00+00:00","i":7}'),
    "empty id": _raw('{"l":"runs","t":"2026-01-01T00:00:00+00:00","i":""}'),
    "NUL in id": _raw('{"l":"runs","t":"2026-01-01T00:00:00+00:00","i":"a\\u0000"}'),
    "overlong id": _raw('{"l":"runs","t":"2026-01-01T00:00:00+00:00","i":"' + "a" * 65 + '"}'),
    "overlong cursor": "A" * 600,
    "non-ascii": "é" * 8,
}


@pytest.mark.parametrize("cursor", BAD_KEYSET_CURSORS.values(), ids=BAD_KEYSET_CURSORS.keys())
def test_a_malformed_keyset_cursor_is_a_cursor_problem(cursor: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_keyset_cursor("runs", cursor)

    assert [item.pointer for item in raised.value.errors] == ["/cursor"]


BAD_POSITION_CURSORS = {
    "negative": _raw('{"l":"run-audit","p":-1}'),
    "boolean": _raw('{"l":"run-audit","p":true}'),
    "float": _raw('{"l":"run-audit","p":1.0}'),
    "string": _raw('{"l":"run-audit","p":"1"}'),
    "beyond the column": _raw('{"l":"run-audit","p":100}'),
    "beyond 64 bits": _raw('{"l":"run-audit","p":18446744073709551616}'),
    "another listing": position_cursor("run-receipts", 1),
    "a keyset cursor": keyset_cursor("run-audit", Keyset(datetime(2026, 1, 1, tzinfo=UTC), "a")),
}


@pytest.mark.parametrize("cursor", BAD_POSITION_CURSORS.values(), ids=BAD_POSITION_CURSORS.keys())
def test_a_malformed_position_cursor_is_a_cursor_problem(cursor: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_position_cursor("run-audit", cursor, maximum=99)

    assert [item.pointer for item in raised.value.errors] == ["/cursor"]
