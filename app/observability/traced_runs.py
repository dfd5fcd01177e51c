"""A run's span: the parent of its calls' spans, from its first call to its recorded end.

The span starts when the run starts executing, in the run's own task (whose
context it copied from the request that launched it), and ends when the run's
end is recorded, or with the task if neither `finish` nor `stop` comes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, format_trace_id

from app.observability.answer_trace_ids import with_trace_id
from app.observability.supervised_run import SupervisedRunLike

# Run statuses that mean the run did not do what it was asked.
FAILED_STATUSES = frozenset({"failed", "error", "interrupted"})


class TracedRun:
    def __init__(self, run: SupervisedRunLike, tracer: Tracer) -> None:
        self._run = run
        self._tracer = tracer
        self._span: Span | None = None

    @property
    def run_id(self) -> str:
        return self._run.run_id

    async def execute(self) -> None:
        kind = getattr(self._run, "kind", None)
        name = "run" if not isinstance(kind, str) else f"run {kind}"
        attributes: dict[str, str] = {"toolloop.run_id": self.run_id}
        if isinstance(kind, str):
            attributes["toolloop.run.kind"] = kind
        span = self._span = self._tracer.start_span(
            name, kind=SpanKind.INTERNAL, attributes=attributes
        )
        task = asyncio.current_task()
        if task is not None:
            task.add_done_callback(lambda _: self._end())
        with trace.use_span(
            span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            try:
                await self._run.execute()
            except asyncio.CancelledError:
                raise  # a stop: `stop` ends the span
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR))
                self._end()
                raise

    async def finish(self) -> Any:
        try:
            result = await self._run.finish()
        except BaseException as exc:
            self._failed(type(exc).__qualname__)
            raise
        self._ended_as(getattr(result, "status", None))
        return self._traced(result)

    async def stop(self, status: str) -> Any:
        try:
            result = await self._run.stop(status)
        except BaseException as exc:
            self._failed(type(exc).__qualname__)
            raise
        self._ended_as(status)
        return self._traced(result)

    def _traced(self, result: Any) -> Any:
        """The run's result, its answer and stored copy carrying the trace id."""
        span = self._span
        if span is None or not dataclasses.is_dataclass(result):
            return result
        response = getattr(result, "response", None)
        redacted = getattr(result, "redacted", None)
        if not isinstance(response, dict) or not callable(redacted):
            return result
        trace_id = format_trace_id(span.get_span_context().trace_id)
        return dataclasses.replace(  # type: ignore[type-var]
            result,
            response=with_trace_id(response, trace_id),
            redacted=lambda: with_trace_id(redacted(), trace_id),
        )

    def _ended_as(self, status: object) -> None:
        span = self._span
        if span is not None and isinstance(status, str):
            span.set_attribute("toolloop.run.status", status)
            if status in FAILED_STATUSES:
                span.set_attribute("error.type", status)
                span.set_status(Status(StatusCode.ERROR))
        self._end()

    def _failed(self, error_type: str) -> None:
        span = self._span
        if span is not None:
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR))
        self._end()

    def _end(self) -> None:
        span = self._span
        if span is not None and span.is_recording():
            span.end()
