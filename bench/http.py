"""Target 4: HTTP throughput and tail latency against a bare FastAPI endpoint.

Both servers are uvicorn subprocesses with one worker on 127.0.0.1, driven in
turn by the same `wrk` run (32 connections, bounded in time). Ours answers a
one-call and a ten-call sequential plan with durable receipts (SQLite, and
PostgreSQL when available), and, for reference, the one-call plan under a new
`Idempotency-Key` per request; the floor parses the same body and answers JSON.
Beside the first database, our server with its plan route answering early
(`bench.stage_server`) gives a one-call request's CPU stage by stage.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

from bench import databases, harness
from bench.child_processes import ended_with_this_process
from bench.stats import Check, Sample, Section, ratios

COMMAND = "BENCH_ONLY=http .venv/bin/python -m bench"
CONNECTIONS = 32
DURATION_S = 3 if harness.QUICK else 10
ROUNDS = 1 if harness.QUICK else 3


def _body(calls: int) -> str:
    return json.dumps(
        {
            "owner": harness.OWNER,
            "calls": [
                {"call_key": f"c{index}", "tool": "noop", "args": {"text": "hello"}}
                for index in range(calls)
            ],
        }
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _spawn(
    command: Sequence[str], log: Path, environment: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with log.open("w") as sink:
        return subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": ".", **(environment or {})},
            preexec_fn=ended_with_this_process(),
        )


def _tail(log: Path) -> str:
    return log.read_text()[-2000:]


@asynccontextmanager
async def _server(
    command: Sequence[str],
    port: int,
    log: Path,
    *,
    environment: Mapping[str, str] | None = None,
    probe: bool = True,
) -> AsyncIterator[tuple[str, int]]:
    """The server's base URL and process id, once it answers `/healthz` (with
    `probe` false, once its port accepts connections)."""
    process = _spawn(command, log, environment)
    base = f"http://127.0.0.1:{port}"
    try:
        if probe:
            await _answering(process, base, log)
        else:
            await _accepting(process, port, log)
        yield base, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _answering(process: subprocess.Popen[bytes], base: str, log: Path) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(300):
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {_tail(log)}")
            try:
                if (await client.get(f"{base}/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("server did not start within 30 s")


async def _accepting(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    for _ in range(300):
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {_tail(log)}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError("server did not start within 30 s")


_LATENCY = re.compile(r"^\s+(50|75|90|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _cpu_ns(pid: int) -> dict[int, int]:
    """Nanoseconds each thread of `pid` and of its child processes (the SQLite
    writer process) has run (Linux `schedstat`; empty elsewhere). Exact where the
    tick-sampled `stat` counters that `top` reads are not: under `wrk`, `top -H`
    read the event loop's thread as saturated while `schedstat` read it a fifth
    idle (docs/benchmarks.md, section 4)."""
    found: dict[int, int] = {}
    for process in (pid, *_children(pid)):
        for task in Path(f"/proc/{process}/task").glob("*"):
            try:
                found[int(task.name)] = int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return found


def _children(pid: int) -> list[int]:
    try:
        return [
            int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        ]
    except (OSError, ValueError):
        return []


# PostgreSQL's checkpoints so far, and the buffers they wrote (the view moved in 17).
_CHECKPOINTS = {
    15: "SELECT checkpoints_timed + checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter",
    17: "SELECT num_timed + num_requested, buffers_written FROM pg_stat_checkpointer",
}

Counters = Callable[[], dict[str, float]]


# The server processes serving the database's other sessions: our server's. Each
# one's CPU is a counter of its own (`backend cpu ns:<pid>`), which `_wrk` sums.
_BACKEND_CPU = "backend cpu ns:"
_BACKENDS = (
    "SELECT pid FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def _database_counters(url: str) -> tuple[Counters, Callable[[], None]]:
    """A reader of the PostgreSQL server's counters: its checkpoints (`checkpoints`
    started, `checkpoint buffers` written) and, when the server runs on this
    machine, the CPU each of its backends for the database has used (Linux
    `schedstat`), and its closer: read around each of our server's
    rounds, they set a round's p99 beside the checkpoints that ran in it and
    tell a round the database bounded from one our loop did (docs/benchmarks.md,
    section 4)."""
    connection = psycopg.connect(
        make_url(url).set(drivername="postgresql").render_as_string(hide_password=False),
        autocommit=True,  # each read its own transaction: the statistics are not cached
    )
    query = _CHECKPOINTS[17 if connection.info.server_version >= 170000 else 15]
    local = make_url(url).host in (None, "", "127.0.0.1", "localhost", "::1")

    def read() -> dict[str, float]:
        started, written = connection.execute(query).fetchone()  # type: ignore[misc]
        counters = {"checkpoints": float(started), "checkpoint buffers": float(written)}
        if local:
            for (pid,) in connection.execute(_BACKENDS).fetchall():
                counters[f"{_BACKEND_CPU}{pid}"] = float(sum(_cpu_ns(pid).values()))
        return counters

    return read, connection.close


# Our server's group commits, from its own histogram on `/metrics`: how many, and
# how many took longer than a slow commit's bound (a 25 ms bucket's upper edge).
_WRITE_HISTOGRAM = "toolloop_receipt_write_seconds"
_SLOW_COMMIT_S = 0.025
SLOW_COMMITS = f"commits over {_SLOW_COMMIT_S * 1000:.0f} ms"


def writer_commits(metrics_text: str) -> dict[str, float]:
    """The group commits a `/metrics` page counts (`commits`), and those slower than
    `_SLOW_COMMIT_S` (`SLOW_COMMITS`). Read around each round of our server: a
    round's p99 beside the commits the database held up (docs/benchmarks.md,
    section 4)."""
    total = within = None
    for family in text_string_to_metric_families(metrics_text):
        if family.name != _WRITE_HISTOGRAM:
            continue
        for sample in family.samples:
            if sample.name == f"{_WRITE_HISTOGRAM}_count":
                total = sample.value
            elif sample.name == f"{_WRITE_HISTOGRAM}_bucket" and (
                float(sample.labels["le"]) == _SLOW_COMMIT_S
            ):
                within = sample.value
    if total is None or within is None:
        raise RuntimeError(f"/metrics has no {_WRITE_HISTOGRAM} with a {_SLOW_COMMIT_S} s bucket")
    return {"commits": total, SLOW_COMMITS: total - within}


def _server_counters(base: str, database: Counters | None) -> Counters:
    """Our server's commits (`writer_commits`), and the database's counters when given."""

    def read() -> dict[str, float]:
        counted = writer_commits(httpx.get(f"{base}/metrics", timeout=30).text)
        if database is not None:
            counted.update(database())
        return counted

    return read


def _wrk(
    url: str,
    script: Path,
    duration_s: int,
    pid: int | None = None,
    counters: Counters | None = None,
) -> dict[str, float]:
    """One `wrk` run: requests/s and latency percentiles; with the server's `pid`,
    also its CPU per request (all threads, its writer process's included, µs)
    and how busy its event loop's thread was (% of the run's wall time; the
    thread whose id is the pid); with `counters`, how much each grew (and the
    CPU per request of the database's backends, from theirs)."""
    counted = counters() if counters is not None else {}
    before = _cpu_ns(pid) if pid is not None else {}
    started = time.perf_counter_ns()
    done = subprocess.run(
        ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{duration_s}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration_s + 60,
    )
    out = done.stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    elapsed = time.perf_counter_ns() - started
    after = _cpu_ns(pid) if pid is not None else {}
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    latency = {f"p{m[0]}": float(m[1]) * _UNITS[m[2]] for m in _LATENCY.findall(out)}
    figures = {"rps": rate, **latency}
    answered = re.search(r"(\d+) requests in", out)
    if pid is not None and pid in before and pid in after and answered is not None:
        spent = sum(after[tid] - before.get(tid, 0) for tid in after)
        figures["cpu"] = spent / int(answered.group(1)) / 1000
        figures["loop"] = (after[pid] - before[pid]) / elapsed * 100
    if counters is not None:
        grown = {key: value - counted.get(key, 0.0) for key, value in counters().items()}
        backends = [key for key in grown if key.startswith(_BACKEND_CPU)]
        spent_ns = sum(grown.pop(key) for key in backends)
        figures.update(grown)
        if backends and answered is not None:
            figures["backend cpu"] = spent_ns / int(answered.group(1)) / 1000
    return figures


# Each request under a key of its own, what an orchestrator that retries safely
# sends: the second the `wrk` run started, a random number and a counter (two
# runs of this script start seconds apart, so their keys never meet).
_NEW_KEY_PER_REQUEST = """
counter = 0
prefix = tostring(os.time()) .. '-' .. tostring(math.random(1, 1000000000))
request = function()
  counter = counter + 1
  wrk.headers['Idempotency-Key'] = prefix .. '-' .. counter
  return wrk.format(nil)
end
"""


def _script(directory: Path, name: str, body: str, *, new_keys: bool = False) -> Path:
    path = directory / f"{name}.lua"
    escaped = body.replace("\\", "\\\\").replace("'", "\\'")
    path.write_text(
        f"wrk.method = 'POST'\nwrk.body = '{escaped}'\n"
        "wrk.headers['Content-Type'] = 'application/json'\n"
        + (_NEW_KEY_PER_REQUEST if new_keys else "")
    )
    return path


# Our server with its plan route cut short (`bench/stage_server.py`), by subject:
# with the floor's CPU per request beside them, where a one-call request's CPU goes.
_STAGES = {
    "read-quiet": "stage: body read, access line off",
    "read": "stage: body read",
    "parsed": "stage: plan parsed",
}


def _serve_args(port: int, database_url: str) -> list[str]:
    """`toolloop serve`'s arguments for a benchmark server."""
    return [
        "serve", "--registry", str(harness.REGISTRY), "--host", "127.0.0.1",
        "--port", str(port), "--database-url", database_url,
    ]  # fmt: skip


async def _round(
    servers: dict[str, tuple[str, int]],
    scripts: dict[str, Path],
    plans: dict[str, tuple[str, str]],
    counters: Counters | None,
) -> dict[str, dict[str, float]]:
    """One wrk run per subject; `plans` maps subject -> (server, script); `counters`
    (the database's) are read around our server's runs."""
    results = {}
    for subject, (server, script) in plans.items():
        base, pid = servers[server]
        url = f"{base}/plans/sequential"
        read = _server_counters(base, counters) if server == "ours" else None
        results[subject] = await asyncio.to_thread(
            _wrk, url, scripts[script], DURATION_S, pid, read
        )
    return results


async def measure() -> Section:
    section = Section("HTTP (target 4)", COMMAND)
    if shutil.which("wrk") is None:
        section.notes.append("wrk is not installed (apt-get install wrk): HTTP figures skipped")
        return section
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="toolloop-http-") as scratch:
        directory = Path(scratch)
        scripts = {
            "one": _script(directory, "one", _body(1)),
            "ten": _script(directory, "ten", _body(10)),
            "keyed": _script(directory, "keyed", _body(1), new_keys=True),
        }
        databases_to_use = [("SQLite", f"sqlite+aiosqlite:///{directory / 'http.db'}")]
        unavailable = await databases.postgres_available()
        postgres = databases.postgres_database() if unavailable is None else None
        if postgres is not None and not harness.QUICK:
            databases_to_use.append(("PostgreSQL", await postgres.__aenter__()))
        elif unavailable is not None:
            section.notes.append(unavailable)
        try:
            for index, (name, url) in enumerate(databases_to_use):
                # The stages stop before the database: measured beside the first one only.
                await _compare(section, python, directory, scripts, name, url, stages=index == 0)
        finally:
            if postgres is not None and len(databases_to_use) > 1:
                await postgres.__aexit__(None, None, None)
    return section


async def _compare(
    section: Section,
    python: str,
    directory: Path,
    scripts: dict[str, Path],
    name: str,
    url: str,
    *,
    stages: bool,
) -> None:
    floor_port, our_port = _free_port(), _free_port()
    floor_command = [
        python, "-m", "uvicorn", "bench.floor_app:app", "--host", "127.0.0.1",
        "--port", str(floor_port), "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    our_command = [python, "-m", "app.cli", *_serve_args(our_port, url)]
    plans = {
        "floor": ("floor", "one"),
        "one-call plan": ("ours", "one"),
        "ten-call plan": ("ours", "ten"),
        "one-call plan, Idempotency-Key": ("ours", "keyed"),
    }
    staged = {subject: (stage, "one") for stage, subject in _STAGES.items()} if stages else {}
    plans.update(staged)
    units = {
        "rps": "req/s", "p50": "ms", "p99": "ms", "cpu": "µs/req (CPU)", "loop": "% busy",
        "backend cpu": "µs/req (CPU, PostgreSQL's backends)",
        "checkpoints": "started", "checkpoint buffers": "written",
        "commits": "group commits", SLOW_COMMITS: "group commits",
    }  # fmt: skip
    samples: dict[str, dict[str, Sample]] = {subject: {} for subject in plans}
    async with AsyncExitStack() as running:
        counters = None
        if url.startswith("postgresql"):
            counters, close = await asyncio.to_thread(_database_counters, url)
            running.callback(close)
        servers = {
            "floor": await running.enter_async_context(
                _server(floor_command, floor_port, directory / "floor.log")
            ),
            "ours": await running.enter_async_context(
                _server(our_command, our_port, directory / f"ours-{name}.log")
            ),
        }
        for stage, _ in staged.values():
            port = _free_port()
            # A database of its own: the stages answer before using it, but the
            # runtime still opens it (migrations, heartbeats, checkpoints).
            stage_url = f"sqlite+aiosqlite:///{directory / f'stage-{stage}.db'}"
            command = [python, "-m", "bench.stage_server", stage, *_serve_args(port, stage_url)]
            servers[stage] = await running.enter_async_context(
                _server(command, port, directory / f"stage-{stage}.log")
            )
        for server, script in plans.values():
            base = servers[server][0]
            await asyncio.to_thread(_wrk, f"{base}/plans/sequential", scripts[script], 2)
        for index in range(ROUNDS):
            order = list(plans)[index % len(plans) :] + list(plans)[: index % len(plans)]
            chosen = {subject: plans[subject] for subject in order}
            results = await _round(servers, scripts, chosen, counters)
            for subject, figures in results.items():
                for key, value in figures.items():
                    if key in units:
                        samples[subject].setdefault(key, Sample(units[key])).values.append(value)
    _report(section, name, samples, list(staged), database_counters=counters is not None)


def _report(
    section: Section,
    name: str,
    samples: dict[str, dict[str, Sample]],
    staged: list[str],
    *,
    database_counters: bool,
) -> None:
    """One database's rounds as the section's samples, checks and notes."""
    floor = samples["floor"]
    for subject, kept in samples.items():
        for key, sample in kept.items():
            section.samples[f"{name}: {subject}: {key}"] = sample
    for subject, bound in (("one-call plan", 0.5), ("ten-call plan", 0.25)):
        throughput = ratios(samples[subject]["rps"], floor["rps"])
        tail = ratios(samples[subject]["p99"], floor["p99"])
        section.samples[f"{name}: {subject} / floor req/s"] = throughput
        section.samples[f"{name}: {subject} / floor p99"] = tail
        if "cpu" in samples[subject] and "cpu" in floor:
            cpu = ratios(samples[subject]["cpu"], floor["cpu"])
            section.samples[f"{name}: {subject} / floor CPU per request"] = cpu
        section.checks.append(
            Check(f"4 {subject} req/s vs floor, {name}", str(throughput), f"≥ {bound}x",
                  throughput.median >= bound)
        )  # fmt: skip
        if subject == "one-call plan":
            section.checks.append(
                Check(f"4 {subject} p99 vs floor, {name}", str(tail), "≤ 2x", tail.median <= 2.0)
            )
    keyed = "one-call plan, Idempotency-Key"
    throughput = ratios(samples[keyed]["rps"], floor["rps"])
    section.samples[f"{name}: {keyed} / floor req/s"] = throughput
    section.samples[f"{name}: {keyed} / floor p99"] = ratios(samples[keyed]["p99"], floor["p99"])
    section.checks.append(
        Check(
            f"4 {keyed} req/s vs floor, {name}",
            str(throughput),
            "≥ 0.5x",
            None,
            "reference only: the target's plan carries no key; each request here claims "
            "a new one, as a client that retries safely sends",
        )
    )
    rounds = []
    for subject in ("one-call plan", "ten-call plan", keyed):
        kept = samples[subject]
        columns = ["p99", "commits", SLOW_COMMITS]
        if database_counters:
            columns += ["checkpoints", "checkpoint buffers"]
        each = zip(*(kept[column].values for column in columns), strict=True)
        rounds.append(
            f"{subject} "
            + ", ".join(f"{p99:.1f}/" + "/".join(f"{v:.0f}" for v in rest) for p99, *rest in each)
        )
    checkpoints = " / checkpoints started / buffers they wrote" if database_counters else ""
    section.notes.append(
        f"{name}: each round's p99 (ms) / group commits / {SLOW_COMMITS}{checkpoints}, "
        "while our server ran: " + "; ".join(rounds)
    )
    if staged and "cpu" in floor:
        ledger = [f"floor {floor['cpu'].median:,.0f}"]
        for subject in (*staged, "one-call plan"):
            if "cpu" in samples[subject]:
                cpu = ratios(samples[subject]["cpu"], floor["cpu"])
                section.samples[f"{name}: {subject} / floor CPU per request"] = cpu
                ledger.append(f"{subject} {samples[subject]['cpu'].median:,.0f}")
        section.notes.append(
            f"{name}: a one-call request's CPU by stage, µs (medians; the stages are our "
            "server with its plan route answering early, bench/stage_server.py): "
            + "; ".join(ledger)
        )
