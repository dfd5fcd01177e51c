"""The request middleware: request id, HTTP metrics and one log line per request.

A pure ASGI middleware (no BaseHTTPMiddleware: it would run the app in another
task, and the log context would not flow back). The route label is the matched
route's template (`/runs/{run_id}`), never the raw path.
"""

from __future__ import annotations

import logging
import re
from time import perf_counter, time
from typing import Any, cast

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.foundation.ids import new_request_id
from app.foundation.redaction import may_hold_secret, redact_text
from app.observability.context import LogContext, enter_context, leave_context
from app.observability.labels import http_method, status_class
from app.observability.logging import ACCESS_LOGGER, JsonFormatter, own_json_handler
from app.observability.request_metrics import RequestMeter

REQUEST_ID_HEADER = "x-request-id"
_REQUEST_ID_NAME = REQUEST_ID_HEADER.encode("latin-1")
UNMATCHED = "unmatched"
# Probes and scrapes arrive every few seconds; their request lines go out at DEBUG.
QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})

_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

logger = logging.getLogger(ACCESS_LOGGER)


def route_template(scope: Scope) -> str:
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


def incoming_request_id(scope: Scope) -> str | None:
    """A well-formed `X-Request-ID` from the client, redacted (it is echoed and
    logged: an API key sent as one must not be), else None (one is minted)."""
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = value.decode("latin-1").strip()
            if not _REQUEST_ID.fullmatch(text):
                return None
            return redact_text(text) if may_hold_secret(text) else text
    return None


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._meter = RequestMeter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = incoming_request_id(scope) or new_request_id()
        id_value = request_id.encode("latin-1")
        context = LogContext(request_id=request_id, request_state=scope.setdefault("state", {}))
        token = enter_context(context)
        status = 500
        error: str | None = None

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (_REQUEST_ID_NAME, id_value)]
            await send(message)

        started = perf_counter()
        self._meter.started()
        try:
            await self.app(scope, receive, send_with_id)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            self._record(scope, status, perf_counter() - started, error)
            leave_context(token)

    def _record(self, scope: Scope, status: int, seconds: float, error: str | None) -> None:
        method = scope["method"]
        route = route_template(scope)
        self._meter.answered(http_method(method), route, status_class(status), seconds)
        level = logging.DEBUG if route in QUIET_ROUTES and status < 400 else logging.INFO
        if not logger.isEnabledFor(level):
            return
        path = scope.get("path", "")
        duration_ms = round(seconds * 1000.0, 3)
        handler = own_json_handler(logger, level)
        if handler is not None:
            # The line `logging` would write, made without a record and its handling
            # (about half of the line's cost). On any failure the record path below
            # runs, with `logging`'s own error handling.
            try:
                formatter = cast(JsonFormatter, handler.formatter)
                line = formatter.access_line(
                    time(), logging.getLevelName(level), logger.name,
                    method, route, path, status, duration_ms, error,
                )  # fmt: skip
            except Exception:
                pass
            else:
                handler.keep(line, level, logger.name)
                return
        fields: dict[str, Any] = {
            "method": method,
            "route": route,
            "path": path,
            "status": status,
            "duration_ms": duration_ms,
        }
        if error is not None:
            fields["error"] = error
        # `logger.log` would walk the stack for the call site: always this function.
        record = logger.makeRecord(
            logger.name, level, __file__, _LINE, "%s %s %d", (method, route, status), None,
            "_record", fields,
        )  # fmt: skip
        logger.handle(record)


_LINE = ObservabilityMiddleware._record.__code__.co_firstlineno
