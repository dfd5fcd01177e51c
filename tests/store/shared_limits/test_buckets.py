"""A rate limit's token bucket shared by two processes' connections: never more
than `burst + per_second * elapsed` admitted, a reservation only within the wait
allowed, and a lost connection admits nothing until it is back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.postgres


def most_in_any_window(starts: list[float], per_second: float, burst: int) -> float:
    """The largest excess over `burst + per_second * (t_j - t_i)` of the starts in
    any window [t_i, t_j] (<= 0 when the bucket held)."""
    starts = sorted(starts)
    return max(
        (j - i + 1) - (burst + per_second * (starts[j] - starts[i]))
        for i in range(len(starts))
        for j in range(i, len(starts))
    )


async def test_two_processes_share_one_bucket(open_limits: Callable[..., Any]) -> None:
    first, second = await open_limits(), await open_limits()
    loop = asyncio.get_running_loop()
    per_second, burst = 10.0, 3
    starts: list[float] = []

    async def take(limits: Any) -> None:
        delay = await limits.take_token("rated", per_second, burst, None)
        assert delay is not None
        await asyncio.sleep(delay)
        starts.append(loop.time())

    began = loop.time()
    await asyncio.gather(*(take(limits) for limits in (first, second) * 12))

    # A start lands after its token is due, by the loop's own lateness: one token of slack.
    assert most_in_any_window(starts, per_second, burst) <= 1.0
    # Unshared, each process would start its own burst at once; shared, the 24 starts
    # take about (24 - burst) / per_second.
    assert max(starts) - began >= (24 - burst - 1) / per_second


async def test_a_token_is_reserved_only_within_the_wait_allowed(
    open_limits: Callable[..., Any],
) -> None:
    limits = await open_limits()

    assert await limits.take_token("slow", 0.5, 1, None) == 0.0
    assert await limits.take_token("slow", 0.5, 1, 0.5) is None
    waited = await limits.take_token("slow", 0.5, 1, None)
    assert waited is not None
    assert 1.0 < waited <= 2.0
    # The refused ask took nothing: the next token is due after the reserved one.
    after = await limits.take_token("slow", 0.5, 1, None)
    assert after is not None
    assert after > waited + 1.0
