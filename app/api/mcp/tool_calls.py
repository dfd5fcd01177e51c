"""`tools/call`: a one-call run of kind `mcp`, through the plan service and the engine.

Arguments that preflight refuses run nothing: the result is an error that
names every problem, each with its pointer into `arguments`. A call that ran
answers with its receipt: the output as `structuredContent` and as JSON text,
or, when the call did not succeed, an error result with the receipt's error.
Either way `_meta` names the run and the receipt, which `GET /runs/{id}` and
`GET /receipts/{id}` show to the caller as any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
import orjson
from mcp.shared.exceptions import MCPError

from app.api.mcp.approvals import (
    RECEIPT_ID_META,
    RUN_ID_META,
    awaiting_approval,
    error_result,
)
from app.api.mcp.caller import McpCaller
from app.api.mcp.tool_listing import owner_tools, structured_output
from app.contract import Tool
from app.engine import PlanProblem
from app.service.errors import PlanRejected, ServiceError, StorageUnavailable

# Where preflight points into the one call of the plan an MCP call runs as.
_CALL_ARGS = "/calls/0/args"
_ARGUMENTS = "/arguments"


async def call_tool(
    caller: McpCaller, name: str, arguments: Mapping[str, Any]
) -> types.CallToolResult:
    tool = _allowed_tool(caller, name)
    runtime = caller.runtime
    try:
        run = await runtime.plans.open_mcp_call(
            caller.owner, tool.id, arguments, caller.principal.name
        )
        result = await runtime.runs.launch(run).wait()
    except PlanRejected as rejected:
        return _invalid_arguments(rejected.problems)
    except StorageUnavailable:
        raise MCPError(
            types.INTERNAL_ERROR, "The service cannot record runs now; retry later."
        ) from None
    except ServiceError:
        raise MCPError(types.INTERNAL_ERROR, "The service could not run the call.") from None
    response = result.response
    pending = awaiting_approval(response)
    if pending is not None:
        return pending
    receipts = response.get("receipts") or ()
    if not receipts:  # stopped before its call began (cancelled, or the service stopping)
        return error_result(
            f"The run ended {result.status} before the call ran. Run {result.run_id}.",
            run_id=result.run_id,
        )
    return _from_receipt(tool, result.run_id, receipts[0])


def _allowed_tool(caller: McpCaller, name: str) -> Tool:
    for tool in owner_tools(caller.runtime.contract, caller.owner_declaration):
        if tool.id == name:
            return tool
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name!r}.")


def _invalid_arguments(problems: Sequence[PlanProblem]) -> types.CallToolResult:
    lines = ["The arguments are invalid; nothing ran."]
    lines.extend(f"- {_argument_pointer(p.pointer)}: {p.message}" for p in problems)
    return error_result("\n".join(lines))


def _argument_pointer(pointer: str) -> str:
    if pointer == _CALL_ARGS or pointer.startswith(_CALL_ARGS + "/"):
        return _ARGUMENTS + pointer[len(_CALL_ARGS) :]
    return pointer


def _from_receipt(tool: Tool, run_id: str, receipt: Mapping[str, Any]) -> types.CallToolResult:
    meta = {RUN_ID_META: run_id, RECEIPT_ID_META: receipt["receipt_id"]}
    if receipt["status"] == "succeeded":
        structured = structured_output(tool, receipt["output"])
        return types.CallToolResult(
            content=[types.TextContent(text=orjson.dumps(structured).decode())],
            structured_content=structured,
            meta=meta,
        )
    error = receipt.get("error") or {}
    text = (
        f"The call {receipt['status']} ({error.get('kind', 'error')}): "
        f"{error.get('message', 'no message')}. Run {run_id}, receipt {receipt['receipt_id']}."
    )
    if error.get("outcome_unknown"):
        text += " Whether it took effect is unknown."
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True, meta=meta)
