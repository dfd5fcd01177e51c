"""Whether the service exports traces, decided once at start from the standard
`OTEL_*` variables; OpenTelemetry is imported only when it does.

`Tracing` is what the rest of the service sees: the wrappers that add spans to
requests, runs, calls and model requests. Without an OTLP endpoint there is no
`Tracing`, and every path runs its untraced implementation (`docs/decisions.md`,
"Traces over OTLP, imported only when configured").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from app.observability.supervised_run import SupervisedRunLike

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from app.engine.pipeline import CallPipeline
    from app.observability.router import ChatModel

# Either names where spans go; the traces-only one wins (the SDK's own rule).
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SDK_DISABLED = "OTEL_SDK_DISABLED"


class Tracing(Protocol):
    """The spans of a traced service; see `app.observability.otel_tracing.OtelTracing`."""

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """The request span around `app`, continuing an incoming `traceparent`."""

    def pipeline_factory(self) -> Callable[..., CallPipeline]:
        """Builds the engine's call pipeline: an `execute_tool {tool}` span per call."""

    def run(self, run: SupervisedRunLike) -> SupervisedRunLike:
        """The run's span around its calls."""

    def chat_model(self, model: ChatModel) -> ChatModel:
        """A `chat {model}` span per model request."""

    def shutdown(self) -> None:
        """Export what is pending and stop (blocking: call it from a thread)."""


class TracingUnavailable(Exception):
    """Tracing is configured, but the `otel` extra is not installed."""


def tracing_configured(environ: Mapping[str, str]) -> bool:
    if environ.get(SDK_DISABLED, "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def tracing_from_environment(environ: Mapping[str, str], *, payloads: bool) -> Tracing | None:
    """The OTLP exporter's tracing when an endpoint is configured, else None (and
    nothing of OpenTelemetry imported). `payloads`: put redacted arguments and
    outputs on call spans (`TOOLLOOP_TRACE_PAYLOADS`). Raises TracingUnavailable
    when an endpoint is configured but the SDK is not installed: an operator who
    asked for traces is told, not left without them."""
    if not tracing_configured(environ):
        return None
    try:
        from app.observability.otel_tracing import OtelTracing
    except ImportError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        raise TracingUnavailable(
            f"{' or '.join(ENDPOINT_VARIABLES)} is set, but OpenTelemetry is not installed "
            "(pip install 'toolloop[otel]')"
        ) from exc
    return OtelTracing.exporting(payloads=payloads)
