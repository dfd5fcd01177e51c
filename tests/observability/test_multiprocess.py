"""Several workers: with PROMETHEUS_MULTIPROC_DIR set, /metrics merges every process's files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.observability.registry import OWNER

REPO = Path(__file__).resolve().parents[2]

WORKER = """
from app.observability import metrics
from app.observability.exposition import forget_this_process
assert metrics.MULTIPROCESS_DIR is not None
metrics.CALLS.labels("echo", "owner", "succeeded").inc(2)
metrics.CALL_DURATION.labels("echo").observe(0.2)
metrics.CALLS_IN_FLIGHT.labels("echo").inc()
if {stopped}:
    forget_this_process()
"""

METERED_WORKER = """
import asyncio
from pathlib import Path
from app.contract import load_contract
from app.engine.engine import Engine
from app.engine.memory import MemoryAuditSink, MemoryReceiptSink
from app.engine.plan import PlanLimits, PlannedCall, SequentialPlan
from app.engine.preflight import preflight_sequential
from app.engine.run import RunIdentity
from app.observability.calls import MeteredSinks
from tests.observability.registry import OWNER, write_registry

async def main():
    contract = load_contract([write_registry(Path({registry!r}))])
    sinks = MeteredSinks(MemoryReceiptSink(), MemoryAuditSink(), contract)
    engine = Engine(contract, receipts=sinks, audit=sinks)
    calls = tuple(PlannedCall(str(i), "echo", {{"text": "x"}}) for i in range(5))
    plan = SequentialPlan(OWNER, calls)
    checked = preflight_sequential(plan, contract, PlanLimits())
    identity = RunIdentity("run", OWNER, None, {{}}, contract.hash)
    await engine.run_sequential(identity, plan, checked.admitted)
    await engine.aclose()

asyncio.run(main())
"""

SCRAPE = """
import sys
from app.observability.exposition import render_metrics
body, content_type = render_metrics(None)
sys.stdout.write(content_type + "\\n" + body.decode())
"""


def _python(code: str, directory: Path) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _scrape(directory: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    content_type, _, body = _python(SCRAPE, directory).partition("\n")
    assert content_type.startswith("text/plain")
    return _samples(body)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_scrape_sums_counters_and_histograms_over_workers(tmp_path: Path) -> None:
    _python(WORKER.format(stopped=False), tmp_path)
    _python(WORKER.format(stopped=True), tmp_path)

    samples = _scrape(tmp_path)

    calls = (
        "toolloop_calls_total",
        (("owner", "owner"), ("status", "succeeded"), ("tool", "echo")),
    )
    assert samples[calls] == 4
    assert samples[("toolloop_call_duration_seconds_count", (("tool", "echo"),))] == 2
    # Live gauges count only processes that did not say they stopped.
    assert samples[("toolloop_calls_in_flight", (("tool", "echo"),))] == 1
    assert all(name.startswith("toolloop_") for name, _ in samples)


def test_the_scrape_sees_the_calls_metered_by_each_worker(tmp_path: Path) -> None:
    metrics, registry = tmp_path / "metrics", tmp_path / "registry"
    metrics.mkdir()
    registry.mkdir()
    _python(METERED_WORKER.format(registry=str(registry)), metrics)
    _python(METERED_WORKER.format(registry=str(registry)), metrics)

    samples = _scrape(metrics)

    calls = (
        "toolloop_calls_total",
        (("owner", OWNER), ("status", "succeeded"), ("tool", "echo")),
    )
    assert samples[calls] == 10
    assert samples[("toolloop_call_duration_seconds_count", (("tool", "echo"),))] == 10
    assert samples[("toolloop_audit_events_total", (("kind", "call.started"),))] == 10
    assert samples[("toolloop_calls_in_flight", (("tool", "echo"),))] == 0
