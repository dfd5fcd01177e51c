"""Redaction of secrets before anything is stored, logged or returned.

Two mechanisms: values under a tool's declared `redact` key names, and
built-in secret patterns found inside any string (values and keys alike).
The result may share unchanged sub-structures with the input; treat it as
read-only. The input is never mutated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

import orjson

REDACTED = "[REDACTED]"

_TOKEN68 = r"[A-Za-z0-9\-._~+/]{8,}=*"
_B64URL = r"[A-Za-z0-9_\-]"

# (literals the pattern needs, pattern, replacement). Separate patterns rather
# than one alternation: CPython's `re` only skips ahead quickly to a literal
# prefix, and most patterns here start with one (lookbehinds come after it).
_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    (
        ("-----BEGIN",),
        # A block cut off before its END line is redacted to the end of the text.
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
            r"(?s:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)"
        ),
        REDACTED,
    ),
    (
        ("earer", "EARER"),
        re.compile(rf"(?<![A-Za-z0-9_])([Bb](?:earer|EARER)[ \t]+){_TOKEN68}"),
        rf"\1{REDACTED}",
    ),
    # scheme://user:password@host keeps everything but the password.
    (("://",), re.compile(r"(://[^\s/?#@:]*:)[^\s/?#@]+(?=@)"), rf"\1{REDACTED}"),
    (("sk-",), re.compile(rf"sk-(?<!{_B64URL}sk-){_B64URL}{{20,}}"), REDACTED),
    (
        ("eyJ",),
        re.compile(rf"eyJ(?<!{_B64URL}eyJ){_B64URL}+\.{_B64URL}+\.{_B64URL}*"),
        REDACTED,
    ),
    # ToolLoop's own API keys (`app.api.auth.keyring`): tl_<12 hex>_<43+ base64url>.
    (("tl_",), re.compile(rf"tl_[0-9a-f]{{12}}_{_B64URL}{{43,}}"), REDACTED),
    (
        ("AKIA", "ASIA"),
        re.compile(r"A[KS]IA(?<![A-Za-z0-9]A[KS]IA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        REDACTED,
    ),
)


# Every pattern needs one of these literals (`_PATTERNS` names them; a test holds
# `may_hold_secret` to this list); most strings have none.
_LITERALS = ("://", "sk-", "eyJ", "earer", "EARER", "tl_", "AKIA", "ASIA", "-----BEGIN")


def may_hold_secret(text: str) -> bool:
    """False proves `text` holds nothing a built-in pattern would redact."""
    return (
        "://" in text
        or "sk-" in text
        or "eyJ" in text
        or "earer" in text
        or "EARER" in text
        or "tl_" in text
        or "AKIA" in text
        or "ASIA" in text
        or "-----BEGIN" in text
    )


# What orjson must refuse rather than write, for the check above to stand for a walk:
# anything the walk would treat otherwise than as what orjson writes (subclasses,
# dataclasses, datetimes; orjson refuses non-string keys and other objects itself).
_dumps = orjson.dumps
_EXACT_JSON = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def redact_text(text: str) -> str:
    """Replace every built-in secret pattern in `text` with `[REDACTED]`."""
    if not may_hold_secret(text):
        return text
    for literals, pattern, replacement in _PATTERNS:
        for literal in literals:
            if literal in text:
                text = pattern.sub(replacement, text)
                break
    return text


_JSON_CONTAINERS = frozenset({dict, list})

# Values that redaction never changes (exact types: subclasses take the long way).
_UNCHANGED = frozenset({int, float, bool, type(None)})


class Redactor:
    """Redacts JSON-like data for one tool; build it once and reuse it."""

    __slots__ = ("_names",)

    def __init__(self, key_names: Iterable[str] = ()) -> None:
        self._names = frozenset(name.casefold() for name in key_names)

    @staticmethod
    def default() -> Redactor:
        """The shared redactor with no key names: built-in patterns only."""
        return DEFAULT_REDACTOR

    def redact(self, value: Any) -> Any:
        return self.redact_with_json(value)[0]

    def redact_with_json(self, value: Any) -> tuple[Any, bytes | None]:
        """`redact(value)`, and the JSON of what it returns when the check below wrote
        it and found nothing to redact (else None): orjson's plain output, which
        refusing subclasses, dataclasses and datetimes leaves byte for byte the same."""
        if type(value) in _JSON_CONTAINERS and not self._names:
            # One orjson pass (C) proves most containers hold no secret, which the
            # walk (Python, every key and string) takes several times as long to.
            # No literal has a character JSON escapes, so a string holding one
            # shows it as is in the JSON text.
            try:
                written = _dumps(value, option=_EXACT_JSON)
            except TypeError:
                pass  # not plain JSON: the walk decides
            else:
                if not may_hold_secret(written.decode()):
                    return value, written
        try:
            return self._redact(value), None
        except RecursionError:
            # Cyclic or absurdly deep data: refuse rather than store it unredacted.
            raise ValueError("data is self-referencing or too deeply nested to redact") from None

    def _redact(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return redact_text(value)
        if kind is not dict:
            if kind in _UNCHANGED:
                return value
            if isinstance(value, str):
                return redact_text(value)
            if isinstance(value, list | tuple):
                return self._redact_sequence(value)
            if not isinstance(value, Mapping):
                return value
        names = self._names
        map_out: dict[Any, Any] | None = None
        for index, (key, item) in enumerate(value.items()):
            if isinstance(key, str):
                new_key = redact_text(key)
                hidden = bool(names) and key.casefold() in names
            else:
                new_key, hidden = key, False
            if hidden:
                new_item = REDACTED
            elif type(item) is str:  # the common case, without a call to _redact
                new_item = redact_text(item)
            else:
                new_item = self._redact(item)
            if map_out is None:
                if new_key is key and new_item is item:
                    continue
                map_out = dict(islice(value.items(), index))
            map_out[new_key] = new_item
        return value if map_out is None else map_out

    def _redact_sequence(self, value: list[Any] | tuple[Any, ...]) -> Any:
        seq_out: list[Any] | None = None
        for index, item in enumerate(value):
            new_item = self._redact(item)
            if seq_out is None:
                if new_item is item:
                    continue
                seq_out = list(value[:index])
            seq_out.append(new_item)
        if seq_out is None:
            return value
        return tuple(seq_out) if isinstance(value, tuple) else seq_out


DEFAULT_REDACTOR = Redactor()
