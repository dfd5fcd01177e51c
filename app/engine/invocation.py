"""Invocation: one path for sync and async callables.

A coroutine function is called and awaited in the caller's task (no extra
task). A plain function runs in the engine's bounded worker-thread pool, with
the caller's context variables (the execution context among them) copied in,
so a slow sync tool never blocks the event loop. Its thread's work
(`submit`) tells whether it started: one still queued when its caller gives up
is cancelled and never runs, and one running is waited for by whatever must
outlast it (`when_thread_ends`), such as its tool's concurrency slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from contextvars import copy_context
from functools import partial
from typing import Any

from app.contract.compiled import ResolvedCallable


class Invoker:
    def __init__(self, worker_threads: int) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=worker_threads, thread_name_prefix="toolloop-tool"
        )

    def start(self, target: ResolvedCallable, args: Mapping[str, Any]) -> Awaitable[Any]:
        """Begin calling `target` with exactly `args` as keyword arguments."""
        if target.is_async:
            awaitable: Awaitable[Any] = target.function(**args)
            return awaitable
        return self.in_thread(partial(copy_context().run, target.function, **args))

    def submit(self, target: ResolvedCallable, args: Mapping[str, Any]) -> Future[Any]:
        """Queue a sync `target` for a worker thread; await it with `asyncio.wrap_future`."""
        return self._pool.submit(partial(copy_context().run, target.function, **args))

    def in_thread(self, function: Callable[[], Any]) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().run_in_executor(self._pool, function)

    def shutdown(self) -> None:
        """Stop accepting work; threads still running a timed-out call finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def when_thread_ends(work: Future[Any], callback: Callable[[], None]) -> None:
    """Call `callback` on the running event loop once `work`'s thread is done with it."""
    loop = asyncio.get_running_loop()

    def ended(_: Future[Any]) -> None:
        # A loop already closed has nobody left to call back.
        with suppress(RuntimeError):
            loop.call_soon_threadsafe(callback)

    work.add_done_callback(ended)
