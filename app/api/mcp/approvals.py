"""Calls of `requires_confirmation` tools from MCP: never run unapproved.

The engine's gate holds such a call on every path: the one-call run comes back
`pending` (DESIGN §7), and the MCP client gets an error result that says the call
waits for a person's approval, names the run and the confirmation, and how to
approve (`awaiting_approval`). Once approved, the run continues in the background.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types


def awaiting_approval(response: Mapping[str, Any]) -> types.CallToolResult | None:
    """An error result for a run that waits for approval (its call did not run yet),
    else None. `response`: the run's answer, as a plan's."""
    if response.get("status") != "pending":
        return None
    run_id = str(response.get("plan_id"))
    waiting = [entry for entry in response.get("pending") or () if isinstance(entry, Mapping)]
    lines = [
        f"The call waits for a person's approval and has not run. Run {run_id}.",
        *(
            f"Approve with POST /runs/{run_id}/confirmations/{entry.get('confirmation_id')} "
            f"(tool {entry.get('tool')!r}, args_digest {entry.get('args_digest')})."
            for entry in waiting
        ),
        f"Once approved, the call runs; read its result with GET /runs/{run_id}.",
    ]
    return error_result("\n".join(lines), run_id=run_id)


def error_result(text: str, *, run_id: str | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        is_error=True,
        meta=None if run_id is None else {RUN_ID_META: run_id},
    )


# The `_meta` keys of a call's result: where the client finds the run and its receipt.
RUN_ID_META = "toolloop/run_id"
RECEIPT_ID_META = "toolloop/receipt_id"
