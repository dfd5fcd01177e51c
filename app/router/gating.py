"""`requires` gating: checked when the tool list is built and again at dispatch.

Both checks fail closed: a condition that cannot be evaluated hides and blocks
the tool. The judgement is the engine's (`app.engine.requirements`), over the
router's own account of the run.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.contract.compiled import Tool
from app.engine.requirements import unmet_requirements
from app.router.state import RouterState


def gate_problem(
    tool: Tool,
    state: RouterState,
    registered: Mapping[str, Tool],
    in_flight: Mapping[str, int] | None = None,
) -> str | None:
    """Why `tool` may not be offered or dispatched now (None: it may).

    `in_flight` counts calls of each tool admitted in the current turn but not
    yet settled.
    """
    if tool.requires is None:
        return None
    try:
        made = state.calls_of(tool.id) + (in_flight or {}).get(tool.id, 0)
    except Exception as exc:  # fail closed on anything unexpected
        return f"its requirements cannot be evaluated ({type(exc).__name__})"
    unmet = unmet_requirements(tool, state.succeeded, made, registered, "earlier in this run")
    return unmet[0] if unmet else None
