"""Per-tool health over the last hour and day, read from the stored receipts: calls,
failure rate, p50/p95 duration, cache hit rate, admission wait, and calls per hour."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.runs.reads import RunViewer
from app.store.repositories.receipts import ReceiptRepository

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# The newest receipts of the day that are read at most; past that, the figures are
# a sample of the most recent calls (the page says so).
MAX_SAMPLE = 50_000
# A call that ended like this did not succeed; `skipped` never ran and is not counted.
FAILED = frozenset({"failed", "timed_out", "denied"})


@dataclass(frozen=True)
class Window:
    calls: int
    failure_rate: float | None
    p50_ms: float | None
    p95_ms: float | None
    cache_hit_rate: float | None
    admission_wait_ms: float | None


@dataclass(frozen=True)
class ToolHealth:
    tool: str
    last_hour: Window
    last_day: Window
    calls_per_hour: tuple[int, ...]  # 24 buckets, oldest first
    failures_per_hour: tuple[int, ...]


@dataclass(frozen=True)
class HealthReport:
    tools: dict[str, ToolHealth]
    sampled: bool
    at: datetime


@dataclass(frozen=True)
class _Call:
    status: str
    cache_hit: bool
    duration_ms: float | None
    admission_wait_ms: float
    created_at: datetime


def percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, round(fraction * len(sorted_values) + 0.5))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def window(calls: Sequence[_Call]) -> Window:
    ran = [c for c in calls if c.status != "skipped"]
    if not ran:
        return Window(0, None, None, None, None, None)
    durations = sorted(c.duration_ms for c in ran if c.duration_ms is not None)
    return Window(
        calls=len(ran),
        failure_rate=sum(c.status in FAILED for c in ran) / len(ran),
        p50_ms=percentile(durations, 0.50),
        p95_ms=percentile(durations, 0.95),
        cache_hit_rate=sum(c.cache_hit for c in ran) / len(ran),
        admission_wait_ms=sum(c.admission_wait_ms for c in ran) / len(ran),
    )


def tool_health(tool: str, calls: Sequence[_Call], now: datetime) -> ToolHealth:
    per_hour = [0] * 24
    failures = [0] * 24
    for call in calls:
        age = int((now - call.created_at) / HOUR)
        if 0 <= age < 24 and call.status != "skipped":
            per_hour[23 - age] += 1
            failures[23 - age] += call.status in FAILED
    return ToolHealth(
        tool=tool,
        last_hour=window([c for c in calls if now - c.created_at <= HOUR]),
        last_day=window(calls),
        calls_per_hour=tuple(per_hour),
        failures_per_hour=tuple(failures),
    )


async def read_health(
    sessions: async_sessionmaker[AsyncSession], viewer: RunViewer, now: datetime | None = None
) -> HealthReport:
    """Every tool's health as `viewer` may see it: over every run, or only its own."""
    moment = now or datetime.now(UTC)
    async with sessions() as session:
        rows = await ReceiptRepository(session).recent_calls(
            since=moment - DAY, limit=MAX_SAMPLE, run_caller=viewer.visible_run_creator
        )
    by_tool: dict[str, list[_Call]] = defaultdict(list)
    for tool, status, cache_hit, duration_ms, wait_ms, created_at in rows:
        by_tool[tool].append(_Call(status, cache_hit, duration_ms, wait_ms, created_at))
    return HealthReport(
        tools={tool: tool_health(tool, calls, moment) for tool, calls in by_tool.items()},
        sampled=len(rows) >= MAX_SAMPLE,
        at=moment,
    )
