"""The engine: admission, watchdogs, retry, cache, redaction, audit and batches."""

from app.engine.context import ExecutionContext, current_call
from app.engine.errors import CallRejected, DispatchRejected, NoCurrentCall

__all__ = ["CallRejected", "DispatchRejected", "ExecutionContext", "NoCurrentCall", "current_call"]
