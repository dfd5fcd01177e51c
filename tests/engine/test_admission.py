"""Admission: per-tool concurrency and rate limits hold across plans; a plan only narrows."""

from __future__ import annotations

import asyncio
from typing import Any

from app.contract import RateLimit
from app.engine.admission import TokenBucket
from app.engine.receipt import Status
from tests.engine import engine_tools
from tests.engine.harness import tool


def test_token_bucket_allows_a_burst_then_spaces_by_the_rate() -> None:
    now = [100.0]
    bucket = TokenBucket(RateLimit(per_second=10.0, burst=2), clock=lambda: now[0])

    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() == 0.1
    assert round(bucket.reserve(), 9) == 0.2
    now[0] += 1.0
    # The debt of two tokens is repaid; the bucket refills to its burst, never beyond.
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    now[0] += 60.0
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() > 0.0


async def test_tool_max_concurrency_holds_across_two_concurrent_plans(
    make_harness: Any,
) -> None:
    harness = make_harness({"c": tool("counted", max_concurrency=2, effect="read")})

    def plan() -> Any:
        return harness.parallel(
            [(f"lane{i}", [("1", "c", {"delay_s": 0.01})]) for i in range(6)],
            max_concurrency=6,
        )

    first, second = await asyncio.gather(plan(), plan())

    assert engine_tools.STATE.max_in_flight["c"] == 2
    receipts = [r for outcome in (first, second) for lane in outcome.lanes for r in lane.receipts]
    assert all(receipt.status is Status.SUCCEEDED for receipt in receipts)
    assert any(receipt.admission_wait_ms > 0 for receipt in receipts)


async def test_plan_max_concurrency_narrows_the_tool_limit(make_harness: Any) -> None:
    harness = make_harness({"c": tool("counted", max_concurrency=5, effect="read")})

    await harness.parallel(
        [(f"lane{i}", [("1", "c", {"delay_s": 0.01})]) for i in range(8)], max_concurrency=2
    )

    assert engine_tools.STATE.max_in_flight["c"] == 2


async def test_unlimited_tool_runs_lanes_up_to_the_plan_limit(make_harness: Any) -> None:
    harness = make_harness({"c": tool("counted", effect="read")})

    outcome = await harness.parallel(
        [(f"lane{i}", [("1", "c", {"delay_s": 0.01})]) for i in range(8)], max_concurrency=4
    )

    assert engine_tools.STATE.max_in_flight["c"] == 4
    assert all(r.admission_wait_ms == 0.0 for lane in outcome.lanes for r in lane.receipts)


async def test_rate_limit_holds_across_two_concurrent_plans(
    make_harness: Any, monkeypatch: Any
) -> None:
    # The law is checked on the moments the bucket lets calls start: a start
    # recorded by the tool can only come later, and on a loaded machine a
    # late first start can bunch up with on-time ones without any token
    # having been handed out early.
    granted: list[float] = []
    reserve, try_take = TokenBucket.reserve, TokenBucket.try_take

    def recording_reserve(self: TokenBucket) -> float:
        delay = reserve(self)
        granted.append(self._updated + delay)  # the bucket's own clock reading
        return delay

    def recording_try_take(self: TokenBucket) -> bool:
        taken = try_take(self)
        if taken:
            granted.append(self._updated)
        return taken

    monkeypatch.setattr(TokenBucket, "reserve", recording_reserve)
    monkeypatch.setattr(TokenBucket, "try_take", recording_try_take)
    rate, burst = 50.0, 2
    harness = make_harness(
        {"c": tool("counted", rate_limit={"per_second": rate, "burst": burst}, effect="read")}
    )

    def plan() -> Any:
        return harness.parallel(
            [(f"lane{i}", [("1", "c", {"delay_s": 0.0})]) for i in range(5)], max_concurrency=5
        )

    await asyncio.gather(plan(), plan())

    assert len(engine_tools.STATE.starts) == 10
    assert len(granted) == 10
    grants = sorted(granted)
    # Token-bucket law: any window of length w holds at most burst + w * rate grants.
    slack = 1e-6
    for i in range(len(grants)):
        for j in range(i, len(grants)):
            assert j - i + 1 <= burst + (grants[j] - grants[i] + slack) * rate
