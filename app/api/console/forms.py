"""The console's query strings and form bodies, read without a multipart parser: a form
is `application/x-www-form-urlencoded`, bounded in size, one value per name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from urllib.parse import parse_qsl

from fastapi import Request

MAX_FORM_BYTES = 16 * 1024
EXAMPLE_TIME = "2026-12-01T00:00:00Z"


class FormTooLarge(Exception):
    pass


async def read_form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise FormTooLarge
    pairs = parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return dict(reversed(pairs))  # the first value of a name wins


def text(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name, "").strip()
    return value or None


def choice(
    params: Mapping[str, str], name: str, allowed: Sequence[str], problems: list[str]
) -> str | None:
    value = text(params, name)
    if value is not None and value not in allowed:
        problems.append(f"{name}: must be one of {', '.join(allowed)}")
        return None
    return value


def moment(params: Mapping[str, str], name: str, problems: list[str]) -> datetime | None:
    """An RFC 3339 time with its offset, as the API takes it."""
    value = text(params, name)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in value.upper():
        problems.append(
            f"{name}: must be an RFC 3339 time with an offset, e.g. 2026-12-01T00:00:00Z"
        )
        return None
    return parsed.astimezone(UTC)


def flag(params: Mapping[str, str], name: str, problems: list[str]) -> bool | None:
    value = text(params, name)
    if value is None:
        return None
    if value not in ("true", "false"):
        problems.append(f"{name}: must be true or false")
        return None
    return value == "true"
