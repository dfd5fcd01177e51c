"""Invocation: one path for sync and async callables.

A coroutine function is called and awaited in the caller's task (no extra
task). A plain function runs in the engine's bounded worker-thread pool, with
the caller's context variables (the execution context among them) copied in,
so a slow sync tool never blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
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

    def in_thread(self, function: Callable[[], Any]) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().run_in_executor(self._pool, function)

    def shutdown(self) -> None:
        """Stop accepting work; threads still running a timed-out call finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)
