"""The call pipeline with one `execute_tool {tool}` span per call.

OpenTelemetry GenAI conventions: `gen_ai.operation.name` `execute_tool`,
`gen_ai.tool.name`, `gen_ai.tool.call.id` (the receipt id), and on a call that
did not succeed `error.type` (the receipt's error kind) with status ERROR.
Arguments and outputs go on the span only when the operator asked for them
(`TOOLLOOP_TRACE_PAYLOADS`), and then only their redacted copies, redacted as
the stored receipt is. A call made by a running callable (dispatch) is a child
of its parent call's span.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson
from opentelemetry.context import attach, detach
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.util.types import AttributeValue

from app.contract.compiled import Contract, Tool
from app.engine.pipeline import CallPipeline
from app.engine.receipt import Receipt
from app.engine.receipt import Status as ReceiptStatus
from app.engine.run import RunState
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor

EXECUTE_TOOL = "execute_tool"
OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
RUN_ID = "toolloop.run_id"
CALL_KEY = "toolloop.call_key"
ITEM_KEY = "toolloop.item_key"
RECEIPT_STATUS = "toolloop.receipt.status"
ATTEMPTS = "toolloop.attempts"
CACHE_HIT = "toolloop.cache_hit"
CANCELLED = "cancelled"
_SUCCEEDED = ReceiptStatus.SUCCEEDED


class TracedCallPipeline(CallPipeline):
    def __init__(
        self, contract: Contract, *, tracer: Tracer, payloads: bool = False, **ports: Any
    ) -> None:
        super().__init__(contract, **ports)
        self._tracer = tracer
        self._payloads = payloads
        self._span_names = {tool_id: f"{EXECUTE_TOOL} {tool_id}" for tool_id in contract.tools}
        self._redactors = {
            tool_id: Redactor(tool.redact) if tool.redact else DEFAULT_REDACTOR
            for tool_id, tool in contract.tools.items()
        }

    async def execute(
        self,
        state: RunState,
        tool: Tool,
        args: Mapping[str, Any],
        seq: int,
        call_key: str,
        item_key: str | None,
        out: list[Receipt],
        parent_receipt_id: str | None = None,
        *,
        checked_fingerprint: str | None = None,
    ) -> Receipt:
        attributes: dict[str, AttributeValue] = {
            OPERATION: EXECUTE_TOOL,
            TOOL_NAME: tool.id,
            RUN_ID: state.identity.run_id,
            CALL_KEY: call_key,
        }
        if item_key is not None:
            attributes[ITEM_KEY] = item_key
        if self._payloads:
            attributes[TOOL_ARGUMENTS] = _json(self._redactors[tool.id].redact(dict(args)))
        # Not `start_as_current_span`: its context-manager layers cost as much as the span.
        span = self._tracer.start_span(
            self._span_names[tool.id], kind=SpanKind.INTERNAL, attributes=attributes
        )
        token = attach(set_span_in_context(span))
        try:
            receipt = await super().execute(
                state,
                tool,
                args,
                seq,
                call_key,
                item_key,
                out,
                parent_receipt_id,
                checked_fingerprint=checked_fingerprint,
            )
        except asyncio.CancelledError:
            span.set_attributes({ERROR_TYPE: CANCELLED})
            span.set_status(Status(StatusCode.ERROR))
            raise
        else:
            self._describe(span, receipt)
        finally:
            detach(token)
            span.end()
        return receipt

    def _describe(self, span: Span, receipt: Receipt) -> None:
        """The receipt's id, and what went wrong when something did, set at once
        (each `set_attribute` takes the span's lock)."""
        found: dict[str, AttributeValue] = {TOOL_CALL_ID: receipt.receipt_id}
        error = receipt.error
        if receipt.status is not _SUCCEEDED:
            found[RECEIPT_STATUS] = receipt.status.value
        if receipt.attempts > 1:
            found[ATTEMPTS] = receipt.attempts
        if receipt.cache_hit:
            found[CACHE_HIT] = True
        if error is not None:
            found[ERROR_TYPE] = error.kind.value
        elif self._payloads:
            output, _, _ = receipt.redacted_parts()
            found[TOOL_RESULT] = _json(output)
        span.set_attributes(found)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error.kind.value))


def _json(value: Any) -> str:
    return orjson.dumps(value, default=repr).decode()
