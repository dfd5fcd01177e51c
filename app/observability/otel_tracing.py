"""Tracing with the OpenTelemetry SDK: the one module that sets it up.

Imported only when tracing is configured (`app.observability.tracing`). The
exporter, its batching and the resource come from the standard `OTEL_*`
variables, read by the SDK itself (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`, ...). The provider is the service's own, never set
as the process's global one, so that tests can give each app its own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer
from starlette.types import ASGIApp

from app.engine.pipeline import CallPipeline
from app.observability.router import ChatModel
from app.observability.supervised_run import SupervisedRunLike
from app.observability.traced_calls import TracedCallPipeline
from app.observability.traced_chat import TracedChatModel
from app.observability.traced_requests import TracingMiddleware
from app.observability.traced_runs import TracedRun

INSTRUMENTATION_NAME = "toolloop"
DEFAULT_SERVICE_NAME = "toolloop"


def service_resource() -> Resource:
    """The resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; named
    `toolloop` when neither names the service."""
    resource = Resource.create()
    name = resource.attributes.get(SERVICE_NAME)
    if not isinstance(name, str) or name.startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


class OtelTracing:
    def __init__(self, provider: TracerProvider, *, payloads: bool = False) -> None:
        self._provider = provider
        self._tracer: Tracer = provider.get_tracer(INSTRUMENTATION_NAME)
        self._payloads = payloads

    @classmethod
    def exporting(cls, *, payloads: bool) -> OtelTracing:
        """Spans batched to the OTLP/HTTP exporter the `OTEL_*` variables describe."""
        provider = TracerProvider(resource=service_resource())
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        return cls(provider, payloads=payloads)

    @property
    def tracer(self) -> Tracer:
        return self._tracer

    def middleware(self, app: ASGIApp) -> ASGIApp:
        return TracingMiddleware(app, self._tracer)

    def pipeline_factory(self) -> Callable[..., CallPipeline]:
        return partial(TracedCallPipeline, tracer=self._tracer, payloads=self._payloads)

    def run(self, run: SupervisedRunLike) -> SupervisedRunLike:
        return TracedRun(run, self._tracer)

    def chat_model(self, model: ChatModel) -> ChatModel:
        return TracedChatModel(model, self._tracer)

    def shutdown(self) -> None:
        self._provider.shutdown()
