"""Tools that misbehave on purpose: they raise, hang, print, leak threads or return
what JSON cannot hold. Hung calls wait on `RELEASE`, bounded, so no test can hang."""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

HANG_BOUND_S = 60.0
RELEASE = threading.Event()
LEAKED: list[threading.Thread] = []
_lock = threading.Lock()
entered: list[str] = []


def reset() -> None:
    RELEASE.clear()
    with _lock:
        entered.clear()


def release() -> None:
    RELEASE.set()
    for thread in LEAKED:
        thread.join(timeout=HANG_BOUND_S)
    LEAKED.clear()


def raising(kind: str) -> dict[str, Any]:
    if kind == "keyboard":
        raise KeyboardInterrupt("a tool raised KeyboardInterrupt")
    if kind == "system_exit":
        raise SystemExit(3)
    raise RuntimeError(f"the tool failed on purpose ({kind})")


async def hang_async(label: str) -> dict[str, Any]:
    with _lock:
        entered.append(label)
    await asyncio.sleep(HANG_BOUND_S)
    return {"label": label}


def hang_sync(label: str) -> dict[str, Any]:
    with _lock:
        entered.append(label)
    RELEASE.wait(HANG_BOUND_S)
    return {"label": label}


def quick_sync(label: str) -> dict[str, Any]:
    return {"label": label, "thread": threading.current_thread().name}


def invalid_output(label: str) -> dict[str, Any]:
    return {"unexpected": label}


def enormous(size: int, secret: str = "") -> dict[str, Any]:
    return {"blob": "x" * size, "secret": secret}


def nested_enormous(count: int) -> dict[str, Any]:
    return {"rows": [{"id": index, "text": f"row {index}"} for index in range(count)]}


@dataclass
class _Thing:
    name: str


class _Opaque:
    pass


_NOT_JSON: dict[str, Any] = {
    "set": {1, 2},
    "nested_set": {"tags": {"a", "b"}},
    "datetime": datetime(2026, 1, 1, tzinfo=UTC),
    "nested_datetime": {"at": [datetime(2026, 1, 1, tzinfo=UTC)]},
    "object": _Opaque(),
    "dataclass": _Thing("x"),
    "bytes": b"raw",
    "nan": float("nan"),
    "nested_nan": {"score": float("nan")},
    "inf": {"score": float("inf")},
    "negative_inf": [float("-inf")],
    "int_keys": {"counts": {1: "one"}},
    "tuple_keys": {(1, 2): "pair"},
    "cycle": "cycle",
    "big_int": 2**70,
    "surrogate": "half of a pair: \ud800",
}


def not_json(kind: str) -> Any:
    if kind == "cycle":
        looped: dict[str, Any] = {}
        looped["self"] = looped
        return {"value": looped}
    return {"value": _NOT_JSON[kind]}


def json_edge(kind: str) -> Any:
    """Values that are JSON, though not the plainest kind of it."""
    values: dict[str, Any] = {
        "tuple": {"pair": (1, 2)},
        "integral_float": {"n": 2.0},
        "unicode": {"text": "snow \u2603 \U0001f600"},
        "uuid": {"id": uuid.UUID(int=1)},
        "null": {"missing": None, "score": 0.5},
    }
    return values[kind]


def noisy(label: str) -> dict[str, Any]:
    print(f"tool output on stdout for {label}\n" * 100)
    print("\x00\x1b[2J not a log line {", flush=True)
    return {"label": label}


def leak_thread(label: str) -> dict[str, Any]:
    thread = threading.Thread(target=RELEASE.wait, args=(HANG_BOUND_S,), name=f"leaked-{label}")
    thread.start()
    LEAKED.append(thread)
    return {"label": label}


async def araising(kind: str) -> dict[str, Any]:
    return raising(kind)


async def quick_async(label: str) -> dict[str, Any]:
    return {"label": label}
