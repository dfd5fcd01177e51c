"""A tool's `requires` (DESIGN section 3): the one judgement every path applies.

`after` names tools that must have succeeded earlier, `max_per_run` bounds how
often the tool runs in one run. Plan preflight, the engine before a call starts
(plan calls, and calls a running tool dispatches) and the router (when it
offers tools and when it dispatches them) all ask `unmet_requirements`, each
over its own account of what came earlier.

Fail closed: a requirement that cannot be evaluated is unmet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.contract.compiled import Tool


def unmet_requirements(
    tool: Tool,
    succeeded: Callable[[str], int],
    calls_made: int,
    registered: Mapping[str, Tool],
    earlier: str,
) -> list[str]:
    """Every reason `tool` may not run now (empty: it may).

    `succeeded(tool_id)`: how many calls of that tool succeeded before this one,
    in the scope `earlier` names ("earlier in this run", "before it in its lane").
    `calls_made`: the calls of `tool` this run made (or plans) before this one.
    """
    requires = tool.requires
    if requires is None:
        return []
    reasons: list[str] = []
    try:
        for needed in requires.after:
            if needed not in registered:
                reasons.append(
                    f"its requirement on {needed!r} cannot be evaluated: no such tool is registered"
                )
            elif succeeded(needed) < 1:
                reasons.append(f"it requires a successful {needed!r} call {earlier}")
        cap = requires.max_per_run
        if cap is not None and calls_made >= cap:
            reasons.append(f"it may run at most {cap} time(s) per run")
    except Exception as exc:  # fail closed on anything unexpected
        return [f"its requirements cannot be evaluated ({type(exc).__name__})"]
    return reasons


class RunRequirements:
    """What the engine knows of one run for `requires`: the successes in each
    sequence or lane (keyed by `item_key`; None: the sequential plan, or a router
    run) and the calls of each tool in the whole run.

    Only the tools it is told about are counted (`Engine` tells it about required
    and capped tools alone). Mutated on the event loop only, with no await between
    a check and the count it admits, so concurrent lanes cannot both take a last slot.
    """

    __slots__ = ("_calls", "_succeeded")

    def __init__(self) -> None:
        self._succeeded: dict[tuple[str | None, str], int] = {}
        self._calls: dict[str, int] = {}

    def record_success(self, item_key: str | None, tool_id: str) -> None:
        key = (item_key, tool_id)
        self._succeeded[key] = self._succeeded.get(key, 0) + 1

    def record_call(self, tool_id: str) -> None:
        self._calls[tool_id] = self._calls.get(tool_id, 0) + 1

    def seed(self, succeeded: Mapping[str, int], calls: Mapping[str, int]) -> None:
        """Start from what an earlier stretch of the run did (a resumed router run):
        successes in the run's one scope (None), and calls per tool."""
        for tool_id, count in succeeded.items():
            self._succeeded[(None, tool_id)] = self._succeeded.get((None, tool_id), 0) + count
        for tool_id, count in calls.items():
            self._calls[tool_id] = self._calls.get(tool_id, 0) + count

    def unmet(self, tool: Tool, item_key: str | None, registered: Mapping[str, Tool]) -> list[str]:
        """`unmet_requirements` for a call of `tool` in the sequence or lane `item_key`."""
        succeeded = self._succeeded
        return unmet_requirements(
            tool,
            lambda needed: succeeded.get((item_key, needed), 0),
            self._calls.get(tool.id, 0),
            registered,
            "earlier in this run" if item_key is None else "earlier in its lane",
        )
