"""Tools for the hostile-input tests: one counts its runs (its side effect), the others
return or raise what no database can store (U+0000, a lone surrogate)."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
runs: list[str] = []

UNSTORABLE = {"nul": "a\x00b", "surrogate": "a\ud800b"}


def reset() -> None:
    with _lock:
        runs.clear()


def counted(text: str) -> dict[str, Any]:
    with _lock:
        runs.append(text)
    return {"text": text}


def unstorable_output(kind: str) -> dict[str, Any]:
    with _lock:
        runs.append(kind)
    if kind == "nul_key":
        return {"a\x00b": 1}
    return {"text": UNSTORABLE[kind], "nested": [{"deep": UNSTORABLE[kind]}]}


def unstorable_error(kind: str) -> dict[str, Any]:
    with _lock:
        runs.append(kind)
    raise RuntimeError(f"failed on {UNSTORABLE[kind]}")
