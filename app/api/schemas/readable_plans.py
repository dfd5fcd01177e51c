"""The parts of a plan body that can be read when the body as a whole has the wrong shape.

Read only on the error path (`app.api.plan_bodies`), so that its problems can be
reported together with the shape's. A part is readable when it has the type the
model expects; the rest is left out (the shape's own errors name it).
"""

from __future__ import annotations

from typing import Any

from app.engine import PlannedCall, ReadableCall, ReadableChain, ReadablePlan


def readable_sequential(data: Any) -> ReadablePlan | None:
    """What can be read of a `SequentialPlanIn` body (None: not even an object)."""
    if not isinstance(data, dict):
        return None
    chain = _chain("/calls", data.get("calls"))
    return ReadablePlan(
        owner=_text(data.get("owner")),
        chains=() if chain is None else (chain,),
        deadline_s=_number(data.get("deadline_s")),
    )


def readable_parallel(data: Any) -> ReadablePlan | None:
    """What can be read of a `ParallelPlanIn` body (None: not even an object)."""
    if not isinstance(data, dict):
        return None
    raw_lanes = data.get("lanes")
    lanes = raw_lanes if isinstance(raw_lanes, list) else []
    chains: list[ReadableChain] = []
    item_keys: list[tuple[int, str]] = []
    for index, lane in enumerate(lanes):
        if not isinstance(lane, dict):
            continue
        item_key = _text(lane.get("item_key"))
        if item_key is not None:
            item_keys.append((index, item_key))
        chain = _chain(f"/lanes/{index}/calls", lane.get("calls"))
        if chain is not None:
            chains.append(chain)
    max_concurrency = data.get("max_concurrency")
    return ReadablePlan(
        owner=_text(data.get("owner")),
        chains=tuple(chains),
        parallel=True,
        lane_count=len(lanes) if isinstance(raw_lanes, list) else None,
        item_keys=tuple(item_keys),
        max_concurrency=max_concurrency if type(max_concurrency) is int else None,
        deadline_s=_number(data.get("deadline_s")),
    )


def _chain(pointer: str, calls: Any) -> ReadableChain | None:
    if not isinstance(calls, list):
        return None
    readable: list[ReadableCall] = []
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        tool = _text(call.get("tool"))
        if tool is None:
            continue
        call_key = _text(call.get("call_key"))
        args, payload = call.get("args"), call.get("payload")
        arguments_read = (args is None or isinstance(args, dict)) and (
            payload is None or isinstance(payload, dict)
        )
        planned = PlannedCall(call_key or "", tool, args, payload) if arguments_read else None
        readable.append(ReadableCall(index, tool, call_key, planned))
    return ReadableChain(pointer, len(calls), tuple(readable))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
