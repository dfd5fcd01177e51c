"""Values written as PostgreSQL literals read back as themselves, and values that are
not written so are refused rather than guessed at."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum, IntEnum
from typing import Any

import psycopg
import pytest

from app.store.journal.postgres.literals import Literals, NotALiteral, literal_template

pytestmark = pytest.mark.postgres


# A plain str mixin, not StrEnum: its str() is "Colour.RED", never what is written.
class Colour(str, Enum):  # noqa: UP042
    RED = "red"


class Size(IntEnum):
    BIG = 3


@pytest.fixture
async def driver(postgres_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    url = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        yield connection


TRICKY = [
    "plain",
    "",
    "it's",
    "''; DROP TABLE runs; --",
    "back\\slash \\' and \\\\",
    "a back\\slash, no quote",
    "%s %% %(name)s $1 ?",
    'quote " and {braces}, [brackets]',
    "naïve café 漢字 🙂",
    "line\nbreak\ttab\r",
    '{"json": "text", "n": [1, 2]}',
]


async def test_text_is_written_as_libpq_escapes_it(driver: psycopg.AsyncConnection[Any]) -> None:
    literals, escaping = Literals(driver.pgconn), psycopg.pq.Escaping(driver.pgconn)
    for value in TRICKY:
        assert literals.literal(value) == escaping.escape_literal(value.encode()), value


@pytest.mark.parametrize("conforming", ["on", "off"])
@pytest.mark.parametrize("value", TRICKY)
async def test_text_reads_back_as_itself(
    driver: psycopg.AsyncConnection[Any], value: str, conforming: str
) -> None:
    # With standard_conforming_strings off, a backslash in a plain literal escapes.
    await driver.execute(f"SET standard_conforming_strings = {conforming}")
    literal = Literals(driver.pgconn).literal(value)
    cursor = await driver.execute(b"SELECT " + literal + b"::text")
    assert await cursor.fetchone() == (value,)


@pytest.mark.parametrize(
    ("value", "cast", "expected"),
    [
        (None, "text", None),
        (0, "bigint", 0),
        (-(2**63), "bigint", -(2**63)),
        (True, "boolean", True),
        (False, "boolean", False),
        (Colour.RED, "text", "red"),
        (Size.BIG, "integer", 3),
        (
            ["a", "it's", "", "{x}", "back\\slash"],
            "text[]",
            ["a", "it's", "", "{x}", "back\\slash"],
        ),
        ([], "text[]", []),
    ],
)
async def test_other_values_read_back_as_themselves(
    driver: psycopg.AsyncConnection[Any], value: Any, cast: str, expected: Any
) -> None:
    literal = Literals(driver.pgconn).literal(value)
    cursor = await driver.execute(b"SELECT " + literal + b"::" + cast.encode())
    assert await cursor.fetchone() == (expected,)


@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=-7, minutes=-30))])
async def test_aware_datetimes_read_back_as_the_same_instant(
    driver: psycopg.AsyncConnection[Any], zone: timezone
) -> None:
    await driver.execute("SET TIME ZONE 'Asia/Tokyo'")  # neither the value's zone nor UTC
    moment = datetime(2026, 12, 2, 13, 14, 15, 123456, tzinfo=zone)
    cursor = await driver.execute(b"SELECT " + Literals(driver.pgconn).literal(moment))
    assert await cursor.fetchone() == (moment,)


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 12, 2, 13, 0),  # naive: which instant is it?
        "nul \x00 inside",
        ["nul \x00 inside"],
        1.5,
        b"bytes",
        {"a": 1},
        [1, 2],
        ("a", "b"),
    ],
    ids=["naive", "nul", "nul-in-array", "float", "bytes", "dict", "int-list", "tuple"],
)
async def test_values_not_written_as_literals_are_refused(
    driver: psycopg.AsyncConnection[Any], value: Any
) -> None:
    with pytest.raises(NotALiteral):
        Literals(driver.pgconn).literal(value)


async def test_a_statement_takes_its_parameters_in_place_of_its_placeholders(
    driver: psycopg.AsyncConnection[Any],
) -> None:
    template = literal_template("SELECT %s::text, '100%%', %s::int, %s::text")
    statement = Literals(driver.pgconn).statement(template, ["%s", 7, "%b"])
    cursor = await driver.execute(statement)
    assert await cursor.fetchone() == ("%s", "100%", 7, "%b")


async def test_a_connection_reading_another_encoding_is_refused(
    driver: psycopg.AsyncConnection[Any],
) -> None:
    await driver.execute("SET client_encoding TO 'LATIN1'")
    with pytest.raises(NotALiteral, match="client encoding"):
        Literals(driver.pgconn)
