"""Celery round trips (send, run in a worker process, fetch the result) per call.

The worker is a subprocess (`-P solo`, one process) started here and stopped
afterwards; when Redis or the worker is not there, the figure is skipped.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from bench.child_processes import ended_with_this_process
from bench.stats import Sample, wall_clock

ROUND_TRIPS = 200


WORKER = [
    sys.executable, "-m", "celery", "-A", "bench.celery_app", "worker", "-P", "solo",
    "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "warning",
]  # fmt: skip


def _worker() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        WORKER,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": "."},
        preexec_fn=ended_with_this_process(),
    )


def _round_trips(count: int) -> float:
    from bench.celery_app import noop

    started = wall_clock()
    for _ in range(count):
        assert noop.delay("hello").get(timeout=10) == {"text": "hello"}
    return (wall_clock() - started) / count * 1e6


async def measure(rounds: int) -> Sample | str:
    """µs per round trip, or why it could not be measured."""
    try:
        import redis

        from bench.celery_app import BROKER

        redis.Redis.from_url(BROKER, socket_connect_timeout=2).ping()
    except Exception as exc:  # no Redis: skip the peer
        return f"Celery skipped: Redis unavailable ({type(exc).__name__})"
    worker = _worker()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                await asyncio.to_thread(_round_trips, 1)
                break
            except Exception:
                if time.monotonic() > deadline or worker.poll() is not None:
                    return "Celery skipped: the worker did not answer within 60 s"
                await asyncio.sleep(0.5)
        await asyncio.to_thread(_round_trips, 20)
        sample = Sample("µs/call (wall)")
        for _ in range(rounds):
            sample.values.append(await asyncio.to_thread(_round_trips, ROUND_TRIPS))
        return sample
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
