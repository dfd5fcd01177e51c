"""The execution context: a running call's identity, read by the callable out of band.

    from app.engine import current_call

    def charge(amount: int) -> dict:
        call = current_call()
        provider.charge(amount, idempotency_key=call.idempotency_key)

The context is never part of the callable's arguments. Sync callables see it
too: the engine copies it into the worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Mapping
from contextvars import ContextVar, Token
from typing import Any, Protocol

from app.engine.call import Call
from app.engine.errors import DispatchRejected, NoCurrentCall
from app.engine.receipt import Receipt
from app.engine.run import RunKind


class Dispatcher(Protocol):
    async def dispatch(
        self, parent: Call, tool_id: str, args: Mapping[str, Any], call_key: str
    ) -> Receipt: ...


class ExecutionContext:
    """Read-only (properties over private slots). Built when a callable asks for
    it; each `current_call()` gives a new one, for the same call and attempt."""

    __slots__ = ("_attempt", "_call")

    def __init__(self, call: Call, attempt: int) -> None:
        self._call = call
        self._attempt = attempt

    def __repr__(self) -> str:
        return (
            f"ExecutionContext(run_id={self.run_id!r}, tool={self.tool!r}, "
            f"call_key={self.call_key!r}, item_key={self.item_key!r}, attempt={self.attempt})"
        )

    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def run_id(self) -> str:
        return self._call.state.identity.run_id

    @property
    def plan_id(self) -> str:
        return self._call.state.identity.run_id

    @property
    def kind(self) -> RunKind:
        return self._call.state.kind

    @property
    def owner(self) -> str:
        return self._call.state.identity.owner

    @property
    def caller(self) -> str | None:
        return self._call.state.identity.caller

    @property
    def context(self) -> Mapping[str, Any]:
        """The caller-provided context (read-only)."""
        return self._call.state.identity.context

    @property
    def parallel_batch_id(self) -> str | None:
        return self._call.state.parallel_batch_id

    @property
    def tool(self) -> str:
        return self._call.tool.id

    @property
    def receipt_id(self) -> str:
        return self._call.receipt_id

    @property
    def idempotency_key(self) -> str:
        """Minted by the engine; the same for every attempt of this call."""
        return self._call.idempotency_key

    @property
    def call_key(self) -> str:
        return self._call.call_key

    @property
    def item_key(self) -> str | None:
        return self._call.item_key

    @property
    def parent_receipt_id(self) -> str | None:
        return self._call.parent_receipt_id

    async def dispatch(
        self, tool_id: str, args: Mapping[str, Any], *, call_key: str | None = None
    ) -> Receipt:
        """Run another registered tool of this run's owner as a child of this call.

        The child passes the same allowlist and gates; its receipt names this
        call's receipt as parent. Raises DispatchRejected when nothing could run;
        a child that ran and failed is a receipt, not an exception.
        """
        call = self._call
        if call.running_attempt != self.attempt:
            raise DispatchRejected(tool_id, ["the parent call is no longer running"])
        call.dispatches += 1
        if call_key is None:
            call_key = f"{call.call_key}/{call.dispatches}"
        dispatcher: Dispatcher = call.state.dispatcher
        return await dispatcher.dispatch(call, tool_id, args, call_key)

    def dispatch_sync(
        self, tool_id: str, args: Mapping[str, Any], *, call_key: str | None = None
    ) -> Receipt:
        """`dispatch` for a sync callable running in a worker thread (blocks that thread)."""
        loop = self._call.state.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError(
                "dispatch_sync() would block the event loop; use 'await dispatch()' instead"
            )
        future = asyncio.run_coroutine_threadsafe(
            self._dispatch_from_thread(tool_id, args, call_key), loop
        )
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise DispatchRejected(tool_id, ["the parent call stopped running"]) from None

    async def _dispatch_from_thread(
        self, tool_id: str, args: Mapping[str, Any], call_key: str | None
    ) -> Receipt:
        task = asyncio.current_task()
        if task is not None:
            self._call.track(task)
        return await self.dispatch(tool_id, args, call_key=call_key)


# The running call and attempt; `current_call()` wraps them in an ExecutionContext
# when a callable asks (most never do), so a call attempt sets a plain tuple. The
# engine sets and resets it directly on its hot path (`enter_call` does the same).
CURRENT_CALL: ContextVar[tuple[Call, int]] = ContextVar("toolloop_current_call")


def current_call() -> ExecutionContext:
    """The execution context of the tool call running here; raises NoCurrentCall elsewhere."""
    try:
        call, attempt = CURRENT_CALL.get()
    except LookupError:
        raise NoCurrentCall() from None
    return ExecutionContext(call, attempt)


def enter_call(context: ExecutionContext) -> Token[tuple[Call, int]]:
    """Make `context` current; pass the returned token to `leave_call`."""
    return CURRENT_CALL.set((context._call, context._attempt))


def leave_call(token: Token[tuple[Call, int]]) -> None:
    CURRENT_CALL.reset(token)
