"""Rendering `/metrics`: this process's registry, or every worker's files merged."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from app.observability.metrics import MULTIPROCESS_DIR, REGISTRY


class Buffered(Protocol):
    """Something that holds metric updates back and applies them when flushed."""

    def flush(self) -> None: ...


_buffered: weakref.WeakSet[Buffered] = weakref.WeakSet()
_buffered_lock = threading.Lock()


def flush_before_rendering(buffered: Buffered) -> None:
    """Have every render flush `buffered` first, for as long as it lives."""
    with _buffered_lock:
        _buffered.add(buffered)


def flush_at_turn_end(flush: Callable[[], None]) -> bool:
    """Run `flush` at the end of the running event loop's turn (True), or at once
    when no loop runs here (False)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        flush()
        return False
    loop.call_soon(flush)
    return True


def flush_buffered() -> None:
    """Apply every held-back metric update of this process (`render_metrics` does this first)."""
    with _buffered_lock:
        buffers = list(_buffered)
    for buffered in buffers:
        buffered.flush()


def render_metrics(accept: str | None) -> tuple[bytes, str]:
    """The exposition body and its content type (text format unless OpenMetrics is asked for)."""
    flush_buffered()
    encoder, content_type = choose_encoder(accept or "")
    if MULTIPROCESS_DIR is None:
        return encoder(REGISTRY), content_type
    merged = CollectorRegistry()
    MultiProcessCollector(merged, path=MULTIPROCESS_DIR)  # type: ignore[no-untyped-call]
    return encoder(merged), content_type


def forget_this_process() -> None:
    """At shutdown in multiprocess mode: drop this worker's live gauges (in-flight counts)."""
    if MULTIPROCESS_DIR is not None:
        mark_process_dead(os.getpid(), MULTIPROCESS_DIR)  # type: ignore[no-untyped-call]
