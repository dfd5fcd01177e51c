"""What no database here can store: U+0000 (PostgreSQL's text and JSON refuse it) and
a lone surrogate (not encodable as UTF-8).

A tool's output holding either fails its call (`unstorable_problem`, the output
gate's last check, before any row is written); a message holding either (an
exception's text, a problem naming a key) is stored and answered escaped
(`storable_text`), as `\\u0000` and `\\ud800`.
"""

from __future__ import annotations

from typing import Any

UNSTORABLE_OUTPUT = "output cannot be stored"
# What a JSON writer (orjson) writes for U+0000: only a JSON text holding this
# can hold U+0000.
NUL_ESCAPE = b"\\u0000"


def storable_text(text: str) -> str:
    """`text`, with U+0000 and lone surrogates written as `\\uXXXX` escapes."""
    if text.isascii():
        return text.replace("\x00", "\\u0000") if "\x00" in text else text
    text = text.replace("\x00", "\\u0000")
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="backslashreplace").decode()
    return text


def unstorable_problem(value: Any) -> str | None:
    """Where `value` (a JSON value: str keys, no lone surrogate) first holds U+0000,
    in a string or a key, or None when it holds none."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, pointer = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"at {storable_text(pointer) or '/'}: a string holds U+0000"
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                child_pointer = f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}"
                if "\x00" in key:
                    return f"at {storable_text(child_pointer)}: an object key holds U+0000"
                stack.append((child, child_pointer))
        elif isinstance(item, list | tuple):
            # Last first: popped, they come in document order.
            stack.extend(
                (item[index], f"{pointer}/{index}") for index in reversed(range(len(item)))
            )
    return None
