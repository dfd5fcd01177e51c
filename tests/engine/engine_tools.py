"""Registered callables for the engine tests; they measure themselves into `STATE`."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from app.engine import DispatchRejected, current_call


@dataclass
class ToolState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: dict[str, int] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    starts: list[tuple[str, float]] = field(default_factory=list)
    contexts: list[dict[str, Any]] = field(default_factory=list)
    completions: list[str] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    started: asyncio.Event | None = None
    release: threading.Event = field(default_factory=threading.Event)
    thread_entered: threading.Event = field(default_factory=threading.Event)
    thread_finished: threading.Event = field(default_factory=threading.Event)

    def count(self, name: str) -> None:
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1


STATE = ToolState()


def reset() -> None:
    global STATE
    STATE = ToolState()


def _snapshot() -> dict[str, Any]:
    call = current_call()
    return {
        "run_id": call.run_id,
        "plan_id": call.plan_id,
        "kind": call.kind.value,
        "owner": call.owner,
        "tool": call.tool,
        "caller": call.caller,
        "context": dict(call.context),
        "receipt_id": call.receipt_id,
        "idempotency_key": call.idempotency_key,
        "attempt": call.attempt,
        "call_key": call.call_key,
        "item_key": call.item_key,
        "parallel_batch_id": call.parallel_batch_id,
        "parent_receipt_id": call.parent_receipt_id,
    }


def echo(**kwargs: Any) -> dict[str, Any]:
    STATE.count("echo")
    return {"args": kwargs, "thread": threading.current_thread().name}


async def aecho(**kwargs: Any) -> dict[str, Any]:
    STATE.count("aecho")
    return {"args": kwargs, "thread": threading.current_thread().name}


def whoami() -> dict[str, Any]:
    return _snapshot()


async def awhoami() -> dict[str, Any]:
    return _snapshot()


async def mutate_context() -> dict[str, Any]:
    context: Any = current_call().context
    context["injected"] = True
    return {}


async def flaky(succeed_on: int) -> dict[str, Any]:
    """Raises until the given attempt; records the context of every attempt."""
    STATE.contexts.append(_snapshot())
    attempt = current_call().attempt
    if attempt < succeed_on:
        raise RuntimeError(f"attempt {attempt} failed")
    return {"attempt": attempt}


async def fail(message: str) -> dict[str, Any]:
    STATE.count("fail")
    raise RuntimeError(message)


async def hang() -> dict[str, Any]:
    """Waits until cancelled; counts its attempts."""
    STATE.count(current_call().tool)
    if STATE.started is not None:
        STATE.started.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        STATE.cancelled.append(current_call().call_key)
        raise
    return {}


def block() -> dict[str, Any]:
    """A sync tool that blocks its worker thread until the test releases it."""
    STATE.count(current_call().tool)
    STATE.thread_entered.set()
    STATE.release.wait(timeout=30)
    STATE.thread_finished.set()
    return {"late": True}


async def sleep_then_echo(delay_s: float, tag: str) -> dict[str, Any]:
    await asyncio.sleep(delay_s)
    STATE.completions.append(tag)
    return {"tag": tag}


async def counted(delay_s: float) -> dict[str, Any]:
    """Measures its own concurrency and start times, per tool id."""
    name = current_call().tool
    with STATE.lock:
        STATE.starts.append((name, asyncio.get_running_loop().time()))
        now = STATE.in_flight.get(name, 0) + 1
        STATE.in_flight[name] = now
        STATE.max_in_flight[name] = max(now, STATE.max_in_flight.get(name, 0))
    try:
        await asyncio.sleep(delay_s)
    finally:
        with STATE.lock:
            STATE.in_flight[name] -= 1
    return {}


async def cached_value(text: str) -> dict[str, Any]:
    STATE.count(current_call().tool)
    return {"text": text.upper()}


async def bad_output() -> dict[str, Any]:
    STATE.count("bad_output")
    return {"unexpected": 1}


async def secret(note: str) -> dict[str, Any]:
    STATE.count(current_call().tool)
    return {"token": "tok-123", "note": note}


async def leak(note: str) -> dict[str, Any]:
    raise RuntimeError(f"upstream said: {note}")


async def report(status: str) -> dict[str, Any]:
    return {"status": status, "summary": "done", "reason_code": "r1"}


async def parent_async(target: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        child = await current_call().dispatch(target, args)
    except DispatchRejected as exc:
        return {"rejected": str(exc)}
    return {"child_status": child.status.value, "child_output": child.output}


def parent_sync(target: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        child = current_call().dispatch_sync(target, args)
    except DispatchRejected as exc:
        return {"rejected": str(exc)}
    return {"child_status": child.status.value, "child_output": child.output}


async def parent_unguarded(target: str, args: dict[str, Any]) -> dict[str, Any]:
    child = await current_call().dispatch(target, args)
    return {"child_status": child.status.value}


def record_evidence(receipt: dict[str, Any]) -> None:
    STATE.evidence.append(receipt)


async def failing_hook(receipt: dict[str, Any]) -> None:
    raise RuntimeError("hook broke with key sk-abcdefghijklmnopqrstuvwxyz")


async def own_timeout() -> dict[str, Any]:
    raise TimeoutError("the upstream socket timed out")


async def task_count() -> dict[str, Any]:
    with STATE.lock:
        STATE.max_in_flight["tasks"] = max(
            len(asyncio.all_tasks()), STATE.max_in_flight.get("tasks", 0)
        )
    await asyncio.sleep(0)
    return {}


async def noop() -> dict[str, Any]:
    return {}


def late_dispatch(target: str) -> dict[str, Any]:
    """Blocks past its timeout, then tries to dispatch: the engine must refuse."""
    call = current_call()
    STATE.thread_entered.set()
    STATE.release.wait(timeout=30)
    try:
        call.dispatch_sync(target, {})
    except DispatchRejected as exc:
        STATE.contexts.append({"rejected": str(exc)})
    STATE.thread_finished.set()
    return {}


async def parent_sync_on_loop() -> dict[str, Any]:
    current_call().dispatch_sync("e", {})
    return {}


async def yield_once() -> dict[str, Any]:
    await asyncio.sleep(0)
    return {}


async def raise_cancelled() -> dict[str, Any]:
    """Raises CancelledError itself: its own failure, not the run's cancellation."""
    raise asyncio.CancelledError()


async def raise_exit() -> dict[str, Any]:
    raise SystemExit("the tool tried to exit")
