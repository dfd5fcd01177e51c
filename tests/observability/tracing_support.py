"""An in-process service whose spans go to the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import httpx
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from app.api.app import create_app
from app.observability.otel_tracing import OtelTracing
from app.settings import Settings


def in_memory_tracing(
    exporter: InMemorySpanExporter, *, payloads: bool = False, sampler: Sampler | None = None
) -> OtelTracing:
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracing(provider, payloads=payloads)


@asynccontextmanager
async def traced_client(
    settings: Settings,
    exporter: InMemorySpanExporter,
    *,
    payloads: bool = False,
    sampler: Sampler | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    tracing = in_memory_tracing(exporter, payloads=payloads, sampler=sampler)
    app = create_app(settings, tracing=tracing)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, f"{name!r}: {[span.name for span in spans]}"
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id
