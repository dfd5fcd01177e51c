"""Scale-out: `toolloop serve --workers 2` against one process, on PostgreSQL.

Both servers run side by side on one fresh PostgreSQL database, each started
as `toolloop serve` (one with `--workers 2`), and are loaded in turn by the
same `wrk` run (a separate process: 32 connections, one-call sequential plans,
bounded in time), rotating the order each round. The figure is the median of
the per-round ratios of requests/s, two workers over one process.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

from bench import databases, harness
from bench.http import _body, _free_port, _script, _serve_args, _spawn, _wrk
from bench.stats import Check, Sample, Section, ratios

COMMAND = "BENCH_ONLY=workers .venv/bin/python -m bench"
DURATION_S = 3 if harness.QUICK else 10
ROUNDS = 2 if harness.QUICK else 5
WORKERS = 2
STARTUP_BOUND_S = 180
_UNITS = {"rps": "req/s", "p50": "ms", "p99": "ms"}


async def measure() -> Section:
    section = Section("Workers (scale-out)", COMMAND)
    if shutil.which("wrk") is None:
        section.notes.append("wrk is not installed (apt-get install wrk): workers figures skipped")
        return section
    unavailable = await databases.postgres_available()
    if unavailable is not None:
        section.notes.append(f"{unavailable}: workers figures need PostgreSQL, skipped")
        return section
    with tempfile.TemporaryDirectory(prefix="toolloop-workers-") as scratch:
        async with databases.postgres_database() as url:
            await _compare(section, Path(scratch), url)
    return section


async def _compare(section: Section, directory: Path, url: str) -> None:
    script = _script(directory, "one", _body(1))
    one_port, many_port = _free_port(), _free_port()
    program = [sys.executable, "-m", "app.cli"]
    subjects = {
        "one process": [*program, *_serve_args(one_port, url)],
        f"{WORKERS} workers": [*program, *_serve_args(many_port, url), "--workers", str(WORKERS)],
    }
    samples: dict[str, dict[str, Sample]] = {subject: {} for subject in subjects}
    bases = {"one process": f"http://127.0.0.1:{one_port}"}
    bases[f"{WORKERS} workers"] = f"http://127.0.0.1:{many_port}"
    with ExitStack() as running:
        for index, command in enumerate(subjects.values()):
            running.enter_context(_running(command, directory / f"server-{index}.log"))
        # Ready once every process registered itself and both ports answer; workers
        # take long to start on a busy host, longer than `bench.http` waits.
        await asyncio.to_thread(_wait_for_instances, url, 1 + WORKERS)
        for base in bases.values():
            await asyncio.to_thread(_wait_for_answer, base)
            await asyncio.to_thread(_wrk, f"{base}/plans/sequential", script, 2)
        for index in range(ROUNDS):
            order = list(subjects)[index % 2 :] + list(subjects)[: index % 2]
            for subject in order:
                figures = await asyncio.to_thread(
                    _wrk, f"{bases[subject]}/plans/sequential", script, DURATION_S
                )
                for key, unit in _UNITS.items():
                    samples[subject].setdefault(key, Sample(unit)).values.append(figures[key])
    _report(section, samples)


@contextmanager
def _running(command: Sequence[str], log: Path) -> Iterator[None]:
    """A server process for the block; SIGTERM (a graceful shutdown) at its end."""
    process = _spawn(command, log)
    try:
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_answer(base: str) -> None:
    deadline = time.monotonic() + STARTUP_BOUND_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{base} did not answer in {STARTUP_BOUND_S} s")


def _wait_for_instances(url: str, count: int) -> None:
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    deadline = time.monotonic() + STARTUP_BOUND_S
    while time.monotonic() < deadline:
        with psycopg.connect(conninfo) as connection:
            row = connection.execute("SELECT count(*) FROM service_instances").fetchone()
        if row is not None and row[0] >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{count} service processes did not register in {STARTUP_BOUND_S} s")


def _report(section: Section, samples: dict[str, dict[str, Sample]]) -> None:
    one, many = samples["one process"], samples[f"{WORKERS} workers"]
    for subject, kept in samples.items():
        for key, sample in kept.items():
            section.samples[f"PostgreSQL: {subject}: {key}"] = sample
    throughput = ratios(many["rps"], one["rps"])
    tail = ratios(many["p99"], one["p99"])
    section.samples[f"PostgreSQL: {WORKERS} workers / one process req/s"] = throughput
    section.samples[f"PostgreSQL: {WORKERS} workers / one process p99"] = tail
    section.checks.append(
        Check(
            f"scale-out {WORKERS} workers vs one process, one-call plan req/s, PostgreSQL",
            str(throughput),
            "≥ 1x",
            None,
            "reference only: on a host with as many cores as workers, wrk, PostgreSQL and "
            "each worker's writer process share them with the workers",
        )
    )
    section.notes.append(
        f"PostgreSQL, one-call plans: one process {one['rps'].median:,.0f} req/s (p99 "
        f"{one['p99'].median:.1f} ms), {WORKERS} workers {many['rps'].median:,.0f} req/s "
        f"(p99 {many['p99'].median:.1f} ms); p99 ratio {tail}"
    )
