"""Parallel plans at once against tools with declared limits, on a real server.

The tools write their own enter/exit times (monotonic clock) to a trace file;
from it the test checks, at every instant, a tool's in-flight calls against
its `max_concurrency` and a plan's against the plan's narrower one; in every
window of time, the calls started against `burst + per_second * window`; and
in every lane, each call starting only after the one before it finished.
The responses must hold lanes and receipts in input order. Admission lives in
the engine, not the database, so one database (SQLite) is enough here.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from tests.load.driver import REQUEST_TIMEOUT_S, running_server, stored_counts
from tests.load.load_tools import TRACE_ENV
from tests.load.registry import (
    LIMITED_BURST,
    LIMITED_CONCURRENCY,
    LIMITED_RATE,
    OWNER,
    SLOTTED_CONCURRENCY,
    write_registry,
)

CALLS_PER_LANE = 3
# (tool, lanes, the plan's max_concurrency, each call's delay), one plan per entry.
PLANS = [
    *[("limited", 6, 8, 0.02)] * 3,
    *[("slotted", 8, 16, 0.02)] * 2,
    *[("slotted", 8, 2, 0.02)] * 2,
]
# The tools stamp their start a few microseconds after admission; on a busy
# machine two stamps can be squeezed closer than their admissions were. One
# call of slack per window absorbs that and nothing more.
RATE_SLACK_CALLS = 1


class Span(NamedTuple):
    tool: str
    run_id: str
    item_key: str
    call_key: str
    enter: float
    leave: float


def parallel_plan(tool: str, lanes: int, max_concurrency: int, delay_s: float) -> dict[str, Any]:
    return {
        "owner": OWNER,
        "max_concurrency": max_concurrency,
        "lanes": [
            {
                "item_key": f"lane-{lane:02d}",
                "calls": [
                    {"call_key": str(call), "tool": tool, "args": {"delay_s": delay_s}}
                    for call in range(CALLS_PER_LANE)
                ],
            }
            for lane in range(lanes)
        ],
    }


async def _submit_all(base: str, plans: list[dict[str, Any]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S) as client:
        return await asyncio.gather(*(client.post("/plans/parallel", json=p) for p in plans))


def _spans(trace: Path) -> list[Span]:
    spans = []
    for line in trace.read_text().splitlines():
        tool, run_id, item_key, call_key, enter, leave = line.split()
        spans.append(Span(tool, run_id, item_key, call_key, float(enter), float(leave)))
    return spans


def max_in_flight(spans: list[Span]) -> int:
    # At equal times an exit comes before an enter: a freed slot is reused, not doubled.
    events = sorted([(s.enter, 1) for s in spans] + [(s.leave, -1) for s in spans])
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def rate_excess(starts: list[float], burst: int, per_second: float) -> float:
    """The largest count of starts in any window beyond `burst + per_second * window`."""
    ordered = sorted(starts)
    worst = float("-inf")
    for first in range(len(ordered)):
        for last in range(first, len(ordered)):
            allowed = burst + per_second * (ordered[last] - ordered[first])
            worst = max(worst, (last - first + 1) - allowed)
    return worst


def test_declared_limits_hold_at_every_instant_across_concurrent_plans(
    tmp_path: Path, sqlite_url: str
) -> None:
    trace = tmp_path / "trace.log"
    plans = [parallel_plan(*shape) for shape in PLANS]
    registry = write_registry(tmp_path)
    with running_server(tmp_path, registry, sqlite_url, {TRACE_ENV: str(trace)}) as server:
        responses = asyncio.run(_submit_all(server.base, plans))
    stored = stored_counts(sqlite_url)
    spans = _spans(trace)

    bodies = [response.json() for response in responses]
    assert [response.status_code for response in responses] == [200] * len(plans), bodies
    for plan, body in zip(plans, bodies, strict=True):
        assert body["status"] == "succeeded"
        assert [lane["item_key"] for lane in body["lanes"]] == [
            lane["item_key"] for lane in plan["lanes"]
        ]
        for lane in body["lanes"]:
            keys = [receipt["call_key"] for receipt in lane["receipts"]]
            assert keys == [str(call) for call in range(CALLS_PER_LANE)]
            outputs = [(r["output"]["item_key"], r["output"]["call_key"]) for r in lane["receipts"]]
            assert outputs == [(lane["item_key"], key) for key in keys]
    total_calls = sum(lanes * CALLS_PER_LANE for _, lanes, _, _ in PLANS)
    assert len(spans) == stored.receipts == total_calls

    by_tool: dict[str, list[Span]] = defaultdict(list)
    by_run: dict[str, list[Span]] = defaultdict(list)
    by_lane: dict[tuple[str, str], list[Span]] = defaultdict(list)
    for span in spans:
        by_tool[span.tool].append(span)
        by_run[span.run_id].append(span)
        by_lane[(span.run_id, span.item_key)].append(span)

    peaks = {tool: max_in_flight(tool_spans) for tool, tool_spans in by_tool.items()}
    assert peaks["limited"] <= LIMITED_CONCURRENCY
    assert peaks["slotted"] == SLOTTED_CONCURRENCY  # reached, never exceeded
    plan_limits = {
        body["plan_id"]: plan["max_concurrency"] for plan, body in zip(plans, bodies, strict=True)
    }
    for run_id, run_spans in by_run.items():
        assert max_in_flight(run_spans) <= plan_limits[run_id], run_id

    excess = rate_excess([s.enter for s in by_tool["limited"]], LIMITED_BURST, LIMITED_RATE)
    assert excess <= RATE_SLACK_CALLS

    for lane_spans in by_lane.values():
        ordered = sorted(lane_spans, key=lambda span: int(span.call_key))
        for before, after in pairwise(ordered):
            assert after.enter >= before.leave

    limited = sorted(s.enter for s in by_tool["limited"])
    print(
        "\nparallel limits:",
        json.dumps(
            {
                "plans": len(plans),
                "calls": total_calls,
                "peak_in_flight": peaks,
                "limited_starts_per_s": round((len(limited) - 1) / (limited[-1] - limited[0]), 1),
                "worst_window_excess_calls": round(excess, 3),
            }
        ),
    )
