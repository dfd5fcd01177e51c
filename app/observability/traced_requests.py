"""The request span: one SERVER span per HTTP request, continuing a W3C `traceparent`.

A pure ASGI middleware, in the request's own task, so that what the request
starts (its runs' tasks copy the context) is a child of its span. It also puts
the trace id where the service reads it for the run rows (`trace_context`).
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability.middleware import UNMATCHED, route_template
from app.observability.trace_context import CURRENT_TRACE_ID

_PROPAGATOR = TraceContextTextMapPropagator()
_CARRIED = frozenset({b"traceparent", b"tracestate"})


def incoming_trace_headers(scope: Scope) -> dict[str, str]:
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope.get("headers", ())
        if name in _CARRIED
    }


class TracingMiddleware:
    def __init__(self, app: ASGIApp, tracer: Tracer) -> None:
        self.app = app
        self._tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        parent = _PROPAGATOR.extract(incoming_trace_headers(scope))
        method = scope["method"]
        span = self._tracer.start_span(
            method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": scope.get("path", "")},
        )
        context_token = otel_context.attach(trace.set_span_in_context(span, parent))
        trace_token = CURRENT_TRACE_ID.set(format_trace_id(span.get_span_context().trace_id))
        status = 500

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR))
            raise
        finally:
            # Set at once: each `set_attribute` takes the span's lock.
            answered: dict[str, AttributeValue] = {"http.response.status_code": status}
            route = route_template(scope)
            if route != UNMATCHED:
                span.update_name(f"{method} {route}")
                answered["http.route"] = route
            if status >= 500:
                answered["error.type"] = str(status)
                span.set_status(Status(StatusCode.ERROR))
            span.set_attributes(answered)
            CURRENT_TRACE_ID.reset(trace_token)
            otel_context.detach(context_token)
            span.end()
