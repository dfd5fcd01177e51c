"""Redaction of secrets before anything is stored, logged or returned.

Two mechanisms: values under a tool's declared `redact` key names, and
built-in secret patterns found inside any string (values and keys alike).
For one call, a tool's redactor also follows the values its redacted
arguments had into that call's output, error and control (`for_arguments`):
a tool that repeats a secret it was given does not get it stored.
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

    def redact_message(self, text: str) -> str:
        """An error message as stored: `redact_text`, and for one call, its arguments."""
        return redact_text(text)

    def hide_arguments(self, text: str) -> str:
        """`text` without the values of one call's redacted arguments (none here)."""
        return text

    def for_arguments(self, args: Any) -> Redactor:
        """This redactor for one call whose arguments are `args`: it also replaces the
        values found under the redacted key names, wherever they appear."""
        if not self._names:
            return self
        texts: set[str] = set()
        numbers: set[int | float] = set()
        try:
            _collect_redacted(args, self._names, texts, numbers, hidden=False)
        except RecursionError:
            raise ValueError("arguments are too deeply nested to redact") from None
        if not texts and not numbers:
            return self
        return ArgumentRedactor(self._names, texts, numbers)

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

# A redacted argument's value is also replaced inside longer strings from this
# length on; shorter ones only where a string (or number) is exactly that value,
# or every "a" and "1" of an output would go.
MIN_HIDDEN_SUBSTRING = 4


def _collect_redacted(
    value: Any, names: frozenset[str], texts: set[str], numbers: set[int | float], hidden: bool
) -> None:
    """The strings and numbers of `value` found under a key in `names` (at any depth)."""
    kind = type(value)
    if isinstance(value, str):
        if hidden and value:
            texts.add(str(value))
    elif kind is int or kind is float:
        if hidden:
            numbers.add(value)
            texts.add(repr(value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            inner = hidden or (isinstance(key, str) and key.casefold() in names)
            _collect_redacted(item, names, texts, numbers, inner)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect_redacted(item, names, texts, numbers, hidden)


class ArgumentRedactor(Redactor):
    """A tool's redactor for one call whose redacted arguments held these values."""

    __slots__ = ("_exact", "_numbers", "_substrings")

    def __init__(
        self, names: frozenset[str], texts: Iterable[str], numbers: Iterable[int | float]
    ) -> None:
        super().__init__(names)
        self._exact = frozenset(texts)
        self._numbers = frozenset(numbers)
        # Longest first: a value that holds another is replaced whole.
        long_enough = (text for text in self._exact if len(text) >= MIN_HIDDEN_SUBSTRING)
        self._substrings = tuple(sorted(long_enough, key=len, reverse=True))

    def redact_with_json(self, value: Any) -> tuple[Any, bytes | None]:
        redacted = Redactor.redact_with_json(self, value)[0]
        try:
            return self._hide(redacted), None
        except RecursionError:
            raise ValueError("data is self-referencing or too deeply nested to redact") from None

    def redact_message(self, text: str) -> str:
        return self.hide_arguments(redact_text(text))

    def hide_arguments(self, text: str) -> str:
        if text in self._exact:
            return REDACTED
        for value in self._substrings:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def _hide(self, value: Any) -> Any:
        kind = type(value)
        if isinstance(value, str):
            return self.hide_arguments(value)
        if kind is int or kind is float:
            return REDACTED if value in self._numbers else value
        if isinstance(value, Mapping):
            map_out: dict[Any, Any] | None = None
            for index, (key, item) in enumerate(value.items()):
                new_key = self.hide_arguments(key) if isinstance(key, str) else key
                new_item = self._hide(item)
                if map_out is None:
                    if new_key is key and new_item is item:
                        continue
                    map_out = dict(islice(value.items(), index))
                map_out[new_key] = new_item
            return value if map_out is None else map_out
        if isinstance(value, list | tuple):
            seq_out: list[Any] | None = None
            for index, item in enumerate(value):
                new_item = self._hide(item)
                if seq_out is None:
                    if new_item is item:
                        continue
                    seq_out = list(value[:index])
                seq_out.append(new_item)
            if seq_out is None:
                return value
            return tuple(seq_out) if isinstance(value, tuple) else seq_out
        return value
