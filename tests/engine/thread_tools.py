"""Sync tools for the worker-thread tests: they count the threads inside them."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Inside:
    lock: threading.Lock = field(default_factory=threading.Lock)
    now: int = 0
    peak: int = 0
    entered: int = 0
    left: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    holding: threading.Event = field(default_factory=threading.Event)


INSIDE = Inside()


def reset() -> None:
    global INSIDE
    INSIDE = Inside()


def sleep_inside(seconds: float) -> dict[str, Any]:
    """Sleep `seconds`, counted inside the callable the whole time."""
    inside = INSIDE
    with inside.lock:
        inside.entered += 1
        inside.now += 1
        inside.peak = max(inside.peak, inside.now)
    try:
        time.sleep(seconds)
    finally:
        with inside.lock:
            inside.now -= 1
            inside.left += 1
    return {}


def hold_the_thread() -> dict[str, Any]:
    """Keep a worker thread until the test releases it (bounded)."""
    INSIDE.holding.set()
    INSIDE.release.wait(timeout=30)
    return {}


def never_expected() -> dict[str, Any]:
    with INSIDE.lock:
        INSIDE.entered += 1
    return {}
