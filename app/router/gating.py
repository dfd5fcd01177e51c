"""`requires` gating: checked when the tool list is built and again at dispatch.

Both checks fail closed: a condition that cannot be evaluated hides and blocks
the tool. The vocabulary is closed (DESIGN section 3): `after` (tools that must
have succeeded earlier in the run) and `max_per_run`.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.contract.compiled import Tool
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
    requires = tool.requires
    if requires is None:
        return None
    try:
        for needed in requires.after:
            if needed not in registered:
                return (
                    f"its requirement on {needed!r} cannot be evaluated: no such tool is registered"
                )
            if state.succeeded(needed) < 1:
                return f"it requires a successful {needed!r} call earlier in this run"
        cap = requires.max_per_run
        if cap is not None:
            made = state.calls_of(tool.id) + (in_flight or {}).get(tool.id, 0)
            if made >= cap:
                return f"it may run at most {cap} time(s) per run"
    except Exception as exc:  # fail closed on anything unexpected
        return f"its requirements cannot be evaluated ({type(exc).__name__})"
    return None
