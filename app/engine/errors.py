"""Errors the engine raises to its callers and inside tools.

    Exception
    └── EngineError
        ├── NoCurrentCall       current_call() used outside a running tool call
        ├── CallRejected        a call refused before anything ran (unknown tool, or
        │   │                   outside the run owner's allowlist)
        │   └── DispatchRejected    the same for a dispatch from a running tool, plus bad
        │                           arguments or a parent call no longer running
        └── ReceiptWriteFailed  the receipt sink could not make a receipt durable

Failures of the calls themselves are never raised: they are receipts.
"""

from __future__ import annotations


class EngineError(Exception):
    pass


class NoCurrentCall(EngineError, LookupError):
    def __init__(self) -> None:
        super().__init__(
            "no tool call is running in this context; current_call() works only inside "
            "a callable the engine invoked (or code it runs in that context)"
        )


class CallRejected(EngineError):
    action = "call"

    def __init__(self, tool_id: str, reasons: list[str]) -> None:
        self.tool_id = tool_id
        self.reasons = reasons
        super().__init__(f"{self.action} to {tool_id!r} rejected: " + "; ".join(reasons))


class DispatchRejected(CallRejected):
    action = "dispatch"


class ReceiptWriteFailed(EngineError):
    pass
