"""Opaque list cursors: unpadded urlsafe base64 of a compact JSON document.

A cursor names the listing it belongs to and the position of the last item
served: `{"l": listing, "t": created_at, "i": id}` for newest-first listings,
`{"l": listing, "p": n}` for listings in a run's own order (receipt `seq`,
audit event id), `{"l": "usage-hour"|"usage-day", "t": start, "o": owner, "c":
caller, "p": profile}` for usage sums. Anything else (bad base64, a non-canonical encoding, another
listing's cursor, missing, extra or mistyped fields) is a 422 naming the
`cursor` parameter. Cursors are not signed: forging one only moves where a
page starts; filters and visibility still apply.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import orjson

from app.api.responses import FastJSONResponse
from app.service.errors import InvalidRequest, ProblemItem
from app.service.runs.reads import Keyset
from app.service.usage.reads import UsagePosition

CURSOR_POINTER = "/cursor"
MAX_CURSOR_CHARS = 512
MAX_ID_CHARS = 64
MAX_SEQ = 2**31 - 1
MAX_AUDIT_ID = 2**63 - 1

Position = TypeVar("Position")
Position_co = TypeVar("Position_co", covariant=True)


class Paged(Protocol[Position_co]):
    """A page as the services list it: its items, and where the next page starts."""

    @property
    def items(self) -> Sequence[Any]: ...

    @property
    def next(self) -> Position_co | None: ...


def page_answer(page: Paged[Position], cursor_of: Callable[[Position], str]) -> FastJSONResponse:
    """Every list endpoint's answer: `{"items", "next_cursor"}`, the cursor made by
    `cursor_of` from where the next page starts (null on the last page)."""
    following = page.next
    next_cursor = None if following is None else cursor_of(following)
    return FastJSONResponse({"items": page.items, "next_cursor": next_cursor})


def keyset_cursor(listing: str, keyset: Keyset) -> str:
    moment = keyset.created_at.astimezone(UTC).isoformat()
    return _encode({"l": listing, "t": moment, "i": keyset.id})


def position_cursor(listing: str, position: int) -> str:
    return _encode({"l": listing, "p": position})


def parse_keyset_cursor(listing: str, cursor: str | None) -> Keyset | None:
    if cursor is None:
        return None
    document = _decode((listing,), cursor, {"l", "t", "i"})
    moment, id_ = document["t"], document["i"]
    if not isinstance(moment, str) or not _is_id(id_):
        raise _invalid()
    try:
        created_at = datetime.fromisoformat(moment)
        if created_at.tzinfo is None:
            raise _invalid()
        return Keyset(created_at=created_at.astimezone(UTC), id=id_)
    except (ValueError, OverflowError):
        raise _invalid() from None


def parse_position_cursor(listing: str, cursor: str | None, *, maximum: int) -> int | None:
    """`maximum` is the largest value the position's column holds."""
    found = parse_position_cursor_of((listing,), cursor, maximum=maximum)
    return None if found is None else found[1]


def parse_position_cursor_of(
    listings: tuple[str, ...], cursor: str | None, *, maximum: int
) -> tuple[str, int] | None:
    """(the listing, the position) of a cursor any of `listings` issued."""
    if cursor is None:
        return None
    document = _decode(listings, cursor, {"l", "p"})
    position = document["p"]
    if type(position) is not int or not 0 <= position <= maximum:
        raise _invalid()
    return document["l"], position


def usage_cursor(bucket: str, position: UsagePosition) -> str:
    moment = position.bucket.astimezone(UTC).isoformat()
    return _encode(
        {
            "l": f"usage-{bucket}",
            "t": moment,
            "o": position.owner,
            "c": position.caller,
            "p": position.profile,
        }
    )


def parse_usage_cursor(bucket: str, cursor: str | None) -> UsagePosition | None:
    """A cursor of the same bucket length only: another's positions are other instants."""
    if cursor is None:
        return None
    document = _decode((f"usage-{bucket}",), cursor, {"l", "t", "o", "c", "p"})
    moment = document["t"]
    names = (document["o"], document["c"], document["p"])
    if not isinstance(moment, str) or not all(isinstance(name, str) for name in names):
        raise _invalid()
    try:
        start = datetime.fromisoformat(moment)
    except ValueError:
        raise _invalid() from None
    if start.tzinfo is None:
        raise _invalid()
    return UsagePosition(start.astimezone(UTC), *names)


def _encode(document: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(document)).rstrip(b"=").decode("ascii")


def _decode(listings: tuple[str, ...], cursor: str, fields: set[str]) -> dict[str, Any]:
    if not cursor or len(cursor) > MAX_CURSOR_CHARS or not cursor.isascii():
        raise _invalid()
    padded = cursor + "=" * (-len(cursor) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_", validate=True)
        document = orjson.loads(raw)
    except (binascii.Error, ValueError):
        raise _invalid() from None
    if (
        not isinstance(document, dict)
        or document.keys() != fields
        or document["l"] not in listings
        or _encode(document) != cursor
    ):
        raise _invalid()
    return document


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS and value.isprintable()


def _invalid() -> InvalidRequest:
    message = "The cursor is not one this listing issued; start again without a cursor."
    return InvalidRequest("The request is invalid.", errors=[ProblemItem(CURSOR_POINTER, message)])
