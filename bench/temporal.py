"""Temporal: ToolLoop's Temporal mode against bare Temporal, in the same rounds.

One Temporal dev server (`bench/temporal_server.py`) on 127.0.0.1 serves both sides,
each on its own task queue with two worker processes:

- bare: two `python -m bench.temporal_bare` workers (the SDK's defaults) running the
  benchmark's no-op as a plain activity, in a sequential workflow of the calls or a
  fan-out workflow of one activity per lane (`bench/temporal_bare.py`);
- ToolLoop: `toolloop serve` with `TOOLLOOP_EXECUTOR=temporal` and two `toolloop worker`
  processes on one PostgreSQL database, given the same calls as sequential plans and
  as a parallel plan of one-call lanes over HTTP (receipts stored, as always).

Per call: one-call runs started one after another (a workflow of one activity, a
one-call plan), wall time per run; and one run of many calls in sequence, wall time
per call. Fan-out: wall time of the whole run. The ToolLoop side is measured only
where this tree has `toolloop worker` and PostgreSQL answers; otherwise the section
says why and keeps the floors.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from bench import databases, harness
from bench.child_processes import ended_with_this_process
from bench.stats import (
    Check,
    Measure,
    Sample,
    Section,
    per_call_us,
    ratios,
    rounds,
    wall_clock,
)
from bench.temporal_bare import FanOut, SequentialCalls
from bench.temporal_server import TemporalDevServer, free_port

COMMAND = "BENCH_ONLY=temporal .venv/bin/python -m bench"
WORKERS = 2
RUNS = 20 if harness.QUICK else 50
CALLS = 50 if harness.QUICK else 200
LANES = 200 if harness.QUICK else 1000
ROUNDS = 3 if harness.QUICK else 5
PER_CALL_BOUND = 1.2
FAN_OUT_BOUND = 1.2
READY_BOUND_S = 180.0
# One run (a workflow, a plan) that takes longer has failed: its comparison says so.
RUN_BOUND = datetime.timedelta(seconds=300)
RUN_FAILURES = (httpx.HTTPError, AssertionError, WorkflowFailureError, RPCError)
DATABASE = "toolloop_bench_temporal"
ONE_CALL, IN_SEQUENCE, FAN_OUT = "one-call runs", "calls in sequence", "fan-out"


def _comparisons() -> dict[str, tuple[str, str, float]]:
    """Each comparison's label, unit and bound (on the ToolLoop / bare ratio)."""
    return {
        ONE_CALL: (f"per call, {RUNS} one-call runs in turn", "µs/run (wall)", PER_CALL_BOUND),
        IN_SEQUENCE: (f"per call, {CALLS} calls in sequence", "µs/call (wall)", PER_CALL_BOUND),
        FAN_OUT: (f"{LANES:,} lanes on {WORKERS} workers", "s", FAN_OUT_BOUND),
    }


def _spawn(
    command: Sequence[str], log: Path, environment: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": ".", **(environment or {})},
            preexec_fn=ended_with_this_process(),
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _started(
    stack: AsyncExitStack, command: Sequence[str], log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    process = _spawn(command, log, env)
    stack.callback(_stop, process)
    return process


async def _until_polled(
    client: Client, task_queue: str, processes: Sequence[subprocess.Popen[bytes]], logs: Path
) -> None:
    """Until every worker process polls the queue for workflow and activity tasks."""
    deadline = time.monotonic() + READY_BOUND_S
    kinds = (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)
    while True:
        counts = []
        for kind in kinds:
            described = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=task_queue),
                    task_queue_type=kind,
                )
            )
            counts.append(len({poller.identity for poller in described.pollers}))
        if min(counts) >= len(processes):
            return
        ended = [process.args for process in processes if process.poll() is not None]
        if ended or time.monotonic() > deadline:
            raise RuntimeError(
                f"workers on {task_queue} not polling ({counts}; ended: {ended}); logs in {logs}"
            )
        await asyncio.sleep(0.2)


async def _bare_side(
    stack: AsyncExitStack, server: TemporalDevServer, client: Client, logs: Path
) -> dict[str, Measure]:
    queue = f"bench-bare-{uuid.uuid4().hex[:8]}"
    workers = [
        _started(
            stack,
            [sys.executable, "-m", "bench.temporal_bare", server.address, server.namespace, queue],
            logs / f"bare-worker-{index}.log",
        )
        for index in range(WORKERS)
    ]
    await _until_polled(client, queue, workers, logs)

    async def one_call_runs() -> float:
        started = wall_clock()
        for _ in range(RUNS):
            done = await client.execute_workflow(
                SequentialCalls.run,
                1,
                id=f"one-{uuid.uuid4()}",
                task_queue=queue,
                execution_timeout=RUN_BOUND,
            )
            assert done == 1
        return per_call_us(wall_clock() - started, RUNS)

    async def in_sequence() -> float:
        started = wall_clock()
        done = await client.execute_workflow(
            SequentialCalls.run,
            CALLS,
            id=f"seq-{uuid.uuid4()}",
            task_queue=queue,
            execution_timeout=RUN_BOUND,
        )
        elapsed = wall_clock() - started
        assert done == CALLS
        return per_call_us(elapsed, CALLS)

    async def fan_out() -> float:
        started = wall_clock()
        done = await client.execute_workflow(
            FanOut.run,
            LANES,
            id=f"fan-{uuid.uuid4()}",
            task_queue=queue,
            execution_timeout=RUN_BOUND,
        )
        elapsed = wall_clock() - started
        assert done == LANES
        return elapsed

    await in_sequence()  # warm: the workers' sandboxes and caches, the server's queues
    return {ONE_CALL: one_call_runs, IN_SEQUENCE: in_sequence, FAN_OUT: fan_out}


def _toolloop_missing() -> str | None:
    """Why this tree cannot run the ToolLoop side, or None."""
    probe = subprocess.run(
        [sys.executable, "-m", "app.cli", "worker", "--help"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if probe.returncode != 0:
        return "ToolLoop side not measured: this tree has no `toolloop worker` (Temporal mode)"
    return None


def _sequential_body(calls: int) -> dict[str, object]:
    return {
        "owner": harness.OWNER,
        "calls": [
            {"call_key": f"c{index}", "tool": "noop", "args": dict(harness.ARGS)}
            for index in range(calls)
        ],
    }


def _parallel_body(lanes: int) -> dict[str, object]:
    call = {"call_key": "1", "tool": "noop", "args": dict(harness.ARGS)}
    return {
        "owner": harness.OWNER,
        "max_concurrency": lanes,
        "lanes": [{"item_key": f"l{index}", "calls": [call]} for index in range(lanes)],
    }


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


async def _succeeded(http: httpx.AsyncClient, route: str, body: dict[str, object]) -> None:
    answer = await http.post(route, json=body)
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["status"] == "succeeded", answer.text[:500]


async def _until_ready(http: httpx.AsyncClient, serve: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_BOUND_S
    while True:
        if serve.poll() is not None:
            raise RuntimeError(f"toolloop serve exited: {_tail(log)}")
        try:
            if (await http.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"toolloop serve not ready: {_tail(log)}")
        await asyncio.sleep(0.2)


async def _toolloop_side(
    stack: AsyncExitStack, server: TemporalDevServer, client: Client, logs: Path, url: str
) -> dict[str, Measure]:
    """Serve and two workers on `url` (a migrated PostgreSQL database), on a task queue
    of their own."""
    queue = f"bench-toolloop-{uuid.uuid4().hex[:8]}"
    env = {
        "TOOLLOOP_EXECUTOR": "temporal",
        "TOOLLOOP_TEMPORAL_ADDRESS": server.address,
        "TOOLLOOP_TEMPORAL_NAMESPACE": server.namespace,
        "TOOLLOOP_TEMPORAL_TASK_QUEUE": queue,
        "TOOLLOOP_DATABASE_URL": url,
        "TOOLLOOP_LOG_LEVEL": "WARNING",
    }
    registry = ["--registry", str(harness.REGISTRY)]
    workers = [
        _started(
            stack,
            [sys.executable, "-m", "app.cli", "worker", *registry],
            logs / f"toolloop-worker-{index}.log",
            env,
        )
        for index in range(WORKERS)
    ]
    port = free_port()
    serve_log = logs / "toolloop-serve.log"
    serve = _started(
        stack,
        [sys.executable, "-m", "app.cli", "serve", *registry, "--host", "127.0.0.1",
         "--port", str(port), "--database-url", url],
        serve_log,
        env,
    )  # fmt: skip
    http = await stack.enter_async_context(
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=RUN_BOUND.total_seconds())
    )
    await _until_ready(http, serve, serve_log)
    await _until_polled(client, queue, workers, logs)
    one, sequential, parallel = (
        _sequential_body(1),
        _sequential_body(CALLS),
        _parallel_body(LANES),
    )

    async def one_call_runs() -> float:
        started = wall_clock()
        for _ in range(RUNS):
            await _succeeded(http, "/plans/sequential", one)
        return per_call_us(wall_clock() - started, RUNS)

    async def in_sequence() -> float:
        started = wall_clock()
        await _succeeded(http, "/plans/sequential", sequential)
        return per_call_us(wall_clock() - started, CALLS)

    async def fan_out() -> float:
        started = wall_clock()
        await _succeeded(http, "/plans/parallel", parallel)
        return wall_clock() - started

    await in_sequence()  # warm, as the bare side
    return {ONE_CALL: one_call_runs, IN_SEQUENCE: in_sequence, FAN_OUT: fan_out}


async def _toolloop_or_why(
    stack: AsyncExitStack, server: TemporalDevServer, client: Client, logs: Path
) -> dict[str, Measure] | str:
    missing = await asyncio.to_thread(_toolloop_missing)
    if missing is not None:
        return missing
    unavailable = await databases.postgres_available()
    if unavailable is not None:
        return f"ToolLoop side not measured: its workers share PostgreSQL; {unavailable}"
    async with AsyncExitStack() as side:  # stopped at once when the side fails to start
        try:
            url = await side.enter_async_context(databases.postgres_database(DATABASE))
            measures = await _toolloop_side(side, server, client, logs, url)
        except (RuntimeError, AssertionError, OSError, httpx.HTTPError) as exc:
            return f"ToolLoop side not measured: {type(exc).__name__}: {str(exc)[:500]}"
        stack.push_async_exit(side.pop_all())
        return measures


async def measure() -> Section:
    section = Section("Temporal: ToolLoop's Temporal mode vs bare Temporal", COMMAND)
    logs = Path(tempfile.mkdtemp(prefix="toolloop-bench-temporal-"))
    section.notes.append(f"{WORKERS} worker processes per side on one dev server; logs in {logs}")
    with TemporalDevServer() as server:
        client = await Client.connect(server.address, namespace=server.namespace)
        async with AsyncExitStack() as stack:
            bare = await _bare_side(stack, server, client, logs)
            ours = await _toolloop_or_why(stack, server, client, logs)
            if isinstance(ours, str):
                section.notes.append(ours)
                ours = {}
            for name, (label, unit, bound) in _comparisons().items():
                subjects = {"bare": bare[name]}
                if name in ours:
                    subjects["toolloop"] = ours[name]
                try:
                    samples = await rounds(subjects, ROUNDS, unit)
                except RUN_FAILURES as exc:
                    why = f"a run failed: {type(exc).__name__}: {str(exc)[:300]}"
                    section.checks.append(_target(label, bound, "failed", False, why))
                    continue
                _figures(section, samples, label, bound)
    return section


def _target(label: str, bound: float, figure: str, met: bool | None, note: str = "") -> Check:
    return Check(f"Temporal {label} vs bare Temporal", figure, f"≤ {bound}x", met, note)


def _figures(section: Section, samples: dict[str, Sample], label: str, bound: float) -> None:
    bare = samples["bare"]
    section.samples[f"{label}: bare Temporal"] = bare
    ours = samples.get("toolloop")
    if ours is None:
        missing = "the ToolLoop side is missing"
        section.checks.append(_target(label, bound, "not measured", None, missing))
        return
    section.samples[f"{label}: ToolLoop, TOOLLOOP_EXECUTOR=temporal"] = ours
    ratio = ratios(ours, bare)
    section.samples[f"{label}: ToolLoop / bare"] = ratio
    section.checks.append(_target(label, bound, str(ratio), ratio.median <= bound))
