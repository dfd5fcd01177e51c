"""Soak, behind TOOLLOOP_SOAK=1 (`make soak`): half the measured throughput for ten minutes.

First a closed loop measures what the server sustains; then an open loop sends
plans at half that rate for TOOLLOOP_SOAK_SECONDS (600), sampling the server's
resident memory, open file descriptors and the number of samples on /metrics.
After a warm-up (the first tenth), each must stay flat: the median of the last
third no higher than the median of the first third, within a small allowance.
Medians, because descriptors move with the load (pooled database connections
and client sockets open and close) while a leak raises the floor. Every other
plan carries an `Idempotency-Key` of its own, as a client that retries safely
sends: claimed with its run and answered with its end, never replayed.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import NamedTuple

import pytest

from tests.load.driver import (
    closed_loop,
    metric_series,
    open_fds,
    open_loop,
    peak_rss_mib,
    rss_mib,
    running_server,
    stored_counts,
)
from tests.load.registry import write_registry
from tests.load.test_sequential_load import TOOLS, sequential_plan

pytestmark = pytest.mark.skipif(
    not os.environ.get("TOOLLOOP_SOAK"), reason="the soak runs behind TOOLLOOP_SOAK=1 (make soak)"
)

SOAK_SECONDS = float(os.environ.get("TOOLLOOP_SOAK_SECONDS", "600"))
MEASURE_SECONDS = float(os.environ.get("TOOLLOOP_SOAK_MEASURE_SECONDS", "15"))
CLIENTS = 8
SAMPLES = 60
# Allocator noise, and a few more pooled connections or sockets, on top of the first third.
RSS_ALLOWANCE_MIB = 8.0
FD_ALLOWANCE = 4


class Sample(NamedTuple):
    at_s: float
    rss_mib: float
    fds: int
    series: int


def _every_other_keyed(phase: str) -> Callable[[int], dict[str, str]]:
    """Headers giving every other plan a key of its own in `phase`."""
    return lambda number: {"Idempotency-Key": f"{phase}-{number}"} if number % 2 else {}


def _thirds(samples: list[Sample]) -> tuple[list[Sample], list[Sample]]:
    settled = samples[len(samples) // 10 :]
    third = max(1, len(settled) // 3)
    return settled[:third], settled[-third:]


def test_memory_descriptors_and_metric_series_stay_flat(tmp_path: Path, database_url: str) -> None:
    registry = write_registry(tmp_path)
    samples: list[Sample] = []
    with running_server(tmp_path, registry, database_url) as server:
        pid = server.process.pid

        def sample(at_s: float) -> None:
            samples.append(Sample(at_s, rss_mib(pid), open_fds(pid), metric_series(server.base)))

        measured = asyncio.run(
            closed_loop(
                server.base,
                "/plans/sequential",
                sequential_plan,
                clients=CLIENTS,
                seconds=MEASURE_SECONDS,
                headers=_every_other_keyed("measure"),
            )
        )
        rate = measured.plans / measured.elapsed_s / 2
        soak = asyncio.run(
            open_loop(
                server.base,
                "/plans/sequential",
                sequential_plan,
                rate=rate,
                seconds=SOAK_SECONDS,
                max_in_flight=4 * CLIENTS,
                every_s=SOAK_SECONDS / SAMPLES,
                on_tick=sample,
                headers=_every_other_keyed("soak"),
            )
        )
        sample(soak.elapsed_s)
        peak = peak_rss_mib(pid)
    stored = stored_counts(database_url)

    first, last = _thirds(samples)
    rss = [median(s.rss_mib for s in third) for third in (first, last)]
    fds = [median(s.fds for s in third) for third in (first, last)]
    series = [max(s.series for s in third) for third in (first, last)]
    figures = {
        "database": database_url.split(":", 1)[0],
        "measured_plans_per_s": round(measured.plans / measured.elapsed_s, 1),
        "soak_rate_plans_per_s": round(rate, 1),
        "soak": soak.figures(),
        "rss_mib_median_first_last": [round(value, 1) for value in rss],
        "peak_rss_mib": round(peak, 1),
        "fds_median_first_last": fds,
        "fds_range": [min(s.fds for s in samples), max(s.fds for s in samples)],
        "series_first_last": series,
        "samples": [list(s) for s in samples],
    }
    print("\nsoak:", json.dumps(figures))

    assert not soak.errors
    assert soak.statuses == {200: soak.plans}
    assert stored.receipts == (measured.plans + soak.plans) * len(TOOLS)
    assert stored.distinct_run_seq == stored.receipts
    # Odd numbers carried a key: each answered and stored, none replayed.
    assert stored.completed_keys == measured.plans // 2 + soak.plans // 2
    assert rss[1] <= rss[0] + RSS_ALLOWANCE_MIB
    assert fds[1] <= fds[0] + FD_ALLOWANCE
    assert series[1] == series[0]
