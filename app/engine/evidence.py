"""Evidence hooks: App callables that receive each durable, redacted receipt.

A hook runs only after its receipt is stored. A hook that fails or overruns
is audited and changes nothing: the receipt is already final.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from app.contract.compiled import ResolvedCallable
from app.engine.audit import Auditor
from app.engine.invocation import Invoker
from app.engine.ports import AuditKind
from app.engine.receipt import Receipt
from app.engine.run import RunState
from app.engine.watchdog import WatchdogExpired, watch


class EvidenceHooks:
    __slots__ = ("_auditor", "_clock", "_hooks", "_invoker", "_timeout_s")

    def __init__(
        self,
        hooks: Sequence[ResolvedCallable],
        invoker: Invoker,
        auditor: Auditor,
        timeout_s: float,
        clock: Callable[[], datetime],
    ) -> None:
        self._hooks = tuple(hooks)
        self._clock = clock
        self._invoker = invoker
        self._auditor = auditor
        self._timeout_s = timeout_s

    def __bool__(self) -> bool:
        return bool(self._hooks)

    async def deliver(self, state: RunState, receipt: Receipt) -> None:
        for hook in self._hooks:
            # A fresh copy per hook: one hook cannot alter what the next one sees.
            stored = receipt.to_stored()
            try:
                await watch(self._start(hook, stored), self._timeout_s)
            except WatchdogExpired:
                self._failed(state, receipt, hook, f"timed out after {self._timeout_s:g}s")
            except Exception as exc:
                self._failed(state, receipt, hook, f"{type(exc).__name__}: {exc}")

    def _start(self, hook: ResolvedCallable, stored: dict[str, Any]) -> Any:
        if hook.is_async:
            return hook.function(stored)
        return self._invoker.in_thread(partial(hook.function, stored))

    def _failed(self, state: RunState, receipt: Receipt, hook: ResolvedCallable, why: str) -> None:
        self._auditor.call_event(
            AuditKind.EVIDENCE_FAILED,
            self._clock(),
            state,
            receipt.tool,
            receipt.call_key,
            receipt.item_key,
            {"receipt_id": receipt.receipt_id, "hook": hook.ref, "error": why},
        )
