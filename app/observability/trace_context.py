"""The W3C trace id of the request being served, for the run rows it starts.

Set by the tracing middleware only (`app.observability.traced_requests`); with
tracing off it is never set and reading it costs one context-variable lookup.
Kept free of OpenTelemetry so that the service can read it without importing it.
"""

from __future__ import annotations

from contextvars import ContextVar

# 32 lowercase hex digits, as in a `traceparent` header.
CURRENT_TRACE_ID: ContextVar[str | None] = ContextVar("toolloop_trace_id", default=None)


def current_trace_id() -> str | None:
    return CURRENT_TRACE_ID.get()
