"""PostgreSQL statements with their parameters written in as SQL literals, so that a
whole transaction goes to the server as one simple query
(`app.store.journal.postgres.connection`).

Every string that holds a quote or a backslash is quoted by libpq itself
(`PQescapeLiteral`, through psycopg's `pq.Escaping`), which knows the
connection's encoding and how it reads backslashes; nothing here escapes by
hand. A string with neither is written between quotes, as libpq writes it.
Only the values a batch's statements take are written: text, integers,
booleans, NULL, aware datetimes and arrays of text. Anything else raises
`NotALiteral`, and the caller binds the parameters instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from psycopg import pq


class NotALiteral(TypeError):
    """A value this module does not write as a literal."""


@cache
def literal_template(statement: str) -> bytes:
    """The statement with `%s` placeholders as bytes formatting's `%b` (`%%` stays a
    literal percent sign in both)."""
    return statement.encode().replace(b"%s", b"%b")


class Literals:
    """Writes values as literals for one connection."""

    def __init__(self, pgconn: pq.abc.PGconn) -> None:
        if pgconn.parameter_status(b"client_encoding") != b"UTF8":
            # The statements' own text is UTF-8: a connection reading another
            # encoding binds its parameters instead.
            raise NotALiteral("the connection's client encoding is not UTF8")
        self._escaping = pq.Escaping(pgconn)

    def statement(self, template: bytes, parameters: Sequence[Any]) -> bytes:
        """`template` (`literal_template`) with `parameters` written in."""
        return template % tuple(self.literal(value) for value in parameters)

    def literal(self, value: Any) -> bytes:
        if value is None:
            return b"NULL"
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, bool):
            return b"true" if value else b"false"
        if isinstance(value, int):
            # Parenthesised when negative: a cast after it binds before the minus
            # (`-9223372036854775808::bigint` is out of range).
            return b"%d" % value if value >= 0 else b"(%d)" % value
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise NotALiteral(f"naive datetime {value.isoformat()}")
            return self._text(value.isoformat()) + b"::timestamptz"
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            if not value:
                return b"'{}'::text[]"
            return b"ARRAY[" + b",".join(self._text(item) for item in value) + b"]::text[]"
        raise NotALiteral(f"{type(value).__name__} is not written as a literal")

    def _text(self, value: str) -> bytes:
        data = value.encode()
        if b"\x00" in data:
            # PostgreSQL text cannot hold NUL: bound, it is refused with psycopg's own error.
            raise NotALiteral("text holding a NUL character")
        if b"'" not in data and b"\\" not in data:
            # Nothing to escape (a batch's JSON, mostly): the text between quotes, which
            # is what libpq writes for it, without its pass over every byte.
            return b"'" + data + b"'"
        return self._escaping.escape_literal(data)
