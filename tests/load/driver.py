"""Load drivers against a real `toolloop serve` on 127.0.0.1: clients, probes, stored counts.

Every loop is bounded by its duration (closed loop) or by its number of
requests (open loop); a request has a timeout; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from tests.live_server import ServerProcess

REPO = Path(__file__).resolve().parents[2]
REQUEST_TIMEOUT_S = 60.0

Body = Callable[[int], dict[str, Any]]
Headers = Callable[[int], dict[str, str]]


@contextmanager
def running_server(
    workdir: Path, registry: Path, database_url: str, env: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    server = ServerProcess(
        workdir,
        ["--registry", str(registry), "--database-url", database_url],
        {"PYTHONPATH": str(REPO), **(env or {})},
    )
    try:
        server.wait_until_answering()
        yield server
    finally:
        server.stop()


def _status_kib(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise LookupError(field_name)


def rss_mib(pid: int) -> float:
    return _status_kib(pid, "VmRSS") / 1024


def peak_rss_mib(pid: int) -> float:
    return _status_kib(pid, "VmHWM") / 1024


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def metric_series(base: str) -> int:
    """Samples on /metrics: one per line that is neither a comment nor blank."""
    body = httpx.get(f"{base}/metrics", timeout=30).text
    return sum(1 for line in body.splitlines() if line and not line.startswith("#"))


@dataclass
class LoadResult:
    elapsed_s: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)
    calls: int = 0
    late: int = 0  # open loop: sends that found every in-flight slot busy
    run_ids: list[str] = field(default_factory=list)

    @property
    def plans(self) -> int:
        return len(self.run_ids)

    def figures(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_s)
        return {
            "plans": self.plans,
            "calls": self.calls,
            "plans_per_s": round(self.plans / self.elapsed_s, 1),
            "calls_per_s": round(self.calls / self.elapsed_s, 1),
            "p50_ms": round(percentile(ordered, 0.50) * 1000, 1),
            "p95_ms": round(percentile(ordered, 0.95) * 1000, 1),
            "p99_ms": round(percentile(ordered, 0.99) * 1000, 1),
            "statuses": dict(self.statuses),
            "errors": dict(self.errors),
            "late": self.late,
        }

    def record(self, started: float, response: httpx.Response) -> None:
        self.latencies_s.append(time.perf_counter() - started)
        self.statuses[response.status_code] += 1
        if response.status_code == 200:
            body = response.json()
            self.run_ids.append(body["plan_id"])
            self.calls += _receipt_count(body)


def _receipt_count(body: dict[str, Any]) -> int:
    if "lanes" in body:
        return sum(len(lane["receipts"]) for lane in body["lanes"])
    return len(body["receipts"])


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _post(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    result: LoadResult,
    headers: dict[str, str] | None = None,
) -> None:
    started = time.perf_counter()
    try:
        response = await client.post(path, json=body, headers=headers)
    except httpx.HTTPError as exc:
        result.errors[type(exc).__name__] += 1
        return
    result.record(started, response)


async def closed_loop(
    base: str,
    path: str,
    body: Body,
    *,
    clients: int,
    seconds: float,
    headers: Headers | None = None,
) -> LoadResult:
    """`clients` clients, each sending its next plan as soon as the last one answered,
    starting none after `seconds`; waits for those in flight. `headers(number)`: the
    headers of each plan."""
    result = LoadResult()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
        started = time.perf_counter()
        stop_at = started + seconds
        counter = iter(range(1 << 62))

        async def one_client() -> None:
            while time.perf_counter() < stop_at:
                number = next(counter)
                extra = None if headers is None else headers(number)
                await _post(client, path, body(number), result, extra)

        await asyncio.gather(*(one_client() for _ in range(clients)))
        result.elapsed_s = time.perf_counter() - started
    return result


async def open_loop(
    base: str,
    path: str,
    body: Body,
    *,
    rate: float,
    seconds: float,
    max_in_flight: int,
    every_s: float = 0.0,
    on_tick: Callable[[float], None] | None = None,
    headers: Headers | None = None,
) -> LoadResult:
    """One plan every 1/`rate` seconds for `seconds`, whatever the answers' pace (at most
    `max_in_flight` waiting; a send that finds them all busy is counted as `late`).
    `on_tick(elapsed)` runs every `every_s` seconds (sampling); `headers(number)`: the
    headers of each plan."""
    result = LoadResult()
    total = int(rate * seconds)
    # Few idle connections kept: the server's descriptors then follow the load, not its peaks.
    limits = httpx.Limits(
        max_connections=max_in_flight, max_keepalive_connections=min(4, max_in_flight)
    )
    slots = asyncio.Semaphore(max_in_flight)
    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
        started = time.perf_counter()
        next_tick = started
        tasks: set[asyncio.Task[None]] = set()

        async def send(number: int) -> None:
            try:
                extra = None if headers is None else headers(number)
                await _post(client, path, body(number), result, extra)
            finally:
                slots.release()

        for number in range(total):
            due = started + number / rate
            now = time.perf_counter()
            if on_tick is not None and now >= next_tick:
                on_tick(now - started)
                next_tick = now + every_s
            if due > now:
                await asyncio.sleep(due - now)
            if slots.locked():
                result.late += 1
            await slots.acquire()
            task = asyncio.create_task(send(number))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while tasks:
            await asyncio.wait(tuple(tasks))
        result.elapsed_s = time.perf_counter() - started
    return result


@dataclass(frozen=True)
class StoredCounts:
    runs: int
    runs_by_status: dict[str, int]
    receipts: int
    distinct_ids: int
    distinct_run_seq: int
    completed_keys: int


def stored_counts(database_url: str) -> StoredCounts:
    """What the database holds, read directly (not through the service)."""
    engine = create_engine(database_url.replace("+aiosqlite", ""))
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT status, count(*) FROM runs GROUP BY status"))
            by_status = {str(status): int(count) for status, count in rows}
            receipts, ids, pairs = connection.execute(
                text(
                    "SELECT count(*), count(DISTINCT id), "
                    "(SELECT count(*) FROM (SELECT DISTINCT run_id, seq FROM receipts) AS p) "
                    "FROM receipts"
                )
            ).one()
            keys = connection.execute(
                text("SELECT count(*) FROM idempotency_keys WHERE state = 'completed'")
            ).scalar_one()
    finally:
        engine.dispose()
    return StoredCounts(sum(by_status.values()), by_status, receipts, ids, pairs, keys)
