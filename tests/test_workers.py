"""`toolloop serve --workers N`: real workers on one port and one PostgreSQL database.

Which worker accepts a connection is the kernel's choice, so the tests send
requests (each on a new connection) until the runs show that both workers
served, and then read what each did from the database they share.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cli import main
from app.serving import STARTUP_FAILURE
from app.workers import METRICS_DIRECTORY_VARIABLE, metrics_directory
from bench.child_processes import ended_with_this_process
from tests.faults.fault_tools import GATE_DIR_ENV
from tests.faults.registry import gate, hold, sequential, step, write_registry
from tests.live_server import REPO, free_port, has_ended
from tests.support.replicas import (
    Workers,
    fetch,
    instance_pids,
    run_instance_pid,
    serve_env,
    workers,
)
from tests.support.waiting import wait_for_sync

ASYNC = {"Prefer": "respond-async"}
# Bounds a test's attempts to reach both workers; the kernel spreads connections far sooner.
MAX_ATTEMPTS = 200


def test_more_than_one_worker_on_sqlite_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolloop.db'}"
    registry = str(REPO / "registries" / "example.yml")
    flags = ["serve", "--registry", registry, "--database-url", url]

    assert main([*flags, "--workers", "2"]) == 1
    monkeypatch.setenv("TOOLLOOP_WORKERS", "3")
    assert main(flags) == 1

    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert all("SQLite" in line and "PostgreSQL" in line for line in lines)
    assert lines[0].startswith("toolloop: refusing to start: --workers 2 needs PostgreSQL")
    assert "--workers 3" in lines[1]
    assert not (tmp_path / "toolloop.db").exists()  # refused before touching the database


def test_zero_workers_is_a_settings_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--workers", "0"]) == 1
    assert "workers" in capsys.readouterr().err


def test_a_worker_that_cannot_start_stops_every_worker(tmp_path: Path) -> None:
    # Serving starts at once with --wait-for-database; no database answers on port 1.
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"
    registry = str(REPO / "registries" / "example.yml")
    flags = ["--registry", registry, "--database-url", unreachable, "--wait-for-database", "1"]
    command = [sys.executable, "-m", "app.cli", "serve", "--port", str(free_port())]
    done = subprocess.run(
        [*command, "--workers", "2", *flags],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "TOOLLOOP_LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=ended_with_this_process(),
    )
    assert done.returncode == STARTUP_FAILURE
    last = done.stderr.splitlines()[-1]
    assert last == "toolloop: a worker failed to start (its reason is above); every worker stopped"
    assert "database unavailable at 127.0.0.1:1/nothing" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_metrics_directory_is_private_unless_the_operator_set_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(METRICS_DIRECTORY_VARIABLE, raising=False)
    with metrics_directory() as made:
        assert os.environ[METRICS_DIRECTORY_VARIABLE] == made  # the workers inherit it
        assert Path(made).is_dir()
        assert not any(Path(made).iterdir())
        (Path(made) / "counter_1.db").write_bytes(b"")
    assert not Path(made).exists()
    assert METRICS_DIRECTORY_VARIABLE not in os.environ

    chosen = tmp_path / "metrics"
    chosen.mkdir()
    (chosen / "counter_1.db").write_bytes(b"")
    monkeypatch.setenv(METRICS_DIRECTORY_VARIABLE, str(chosen))
    with metrics_directory() as used:
        assert used == str(chosen)
    assert (chosen / "counter_1.db").exists()  # the operator's, left as it was


def _env(tmp_path: Path, postgres_url: str, **settings: str) -> dict[str, str]:
    registry = write_registry(tmp_path / "registry")
    return {**serve_env(postgres_url, [registry], **settings), GATE_DIR_ENV: str(tmp_path)}


def _metric(base: str, name: str, **labels: str) -> float:
    """The sum over the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in httpx.get(f"{base}/metrics", timeout=10).text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, value = line.rsplit(" ", 1)
        if all(f'{key}="{wanted}"' in head for key, wanted in labels.items()):
            total += float(value)
    return total


def _until_each_worker_ran_one(
    group: Workers, pids: set[int], start: Callable[[], str]
) -> dict[int, list[str]]:
    """Start runs (`start`, each on a new connection) until each worker in `pids`
    holds one: worker pid -> the run ids it holds."""
    held: dict[int, list[str]] = {}
    for _ in range(MAX_ATTEMPTS):
        run_id = start()
        pid = wait_for_sync(partial(run_instance_pid, group.database_url, run_id), "run stored")
        held.setdefault(pid, []).append(run_id)
        if set(held) == pids:
            return held
    raise AssertionError(f"{MAX_ATTEMPTS} runs never reached every worker: {held}")


def _start_held(base: str, call: dict[str, Any]) -> Callable[[], str]:
    """Starts of a background plan of one call that waits (`gate` or `hold`)."""

    def start() -> str:
        response = httpx.post(
            f"{base}/plans/sequential",
            json=sequential(call),
            headers=ASYNC,
            timeout=30,
        )
        assert response.status_code == 202, response.text
        run_id: str = response.json()["run_id"]
        return run_id

    return start


def _status(base: str, run_id: str) -> str:
    response = httpx.get(f"{base}/runs/{run_id}", timeout=30)
    assert response.status_code == 200, response.text
    status: str = response.json()["status"]
    return status


@pytest.mark.postgres
def test_two_workers_share_the_port_the_runs_and_the_metrics(
    tmp_path: Path, postgres_url: str
) -> None:
    with workers(tmp_path, 2, _env(tmp_path, postgres_url)) as group:
        pids = group.wait_until_serving(2)
        assert len(instance_pids(postgres_url)) == 2  # one instance (and heartbeat) each

        plan_ids: list[str] = []

        def run_one() -> str:
            response = httpx.post(
                f"{group.base}/plans/sequential", json=sequential(step("s")), timeout=30
            )
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "succeeded"
            plan_ids.append(response.json()["plan_id"])
            return plan_ids[-1]

        _until_each_worker_ran_one(group, pids, run_one)
        run_instances = fetch(postgres_url, "SELECT DISTINCT instance_id FROM runs")
        assert len(run_instances) == 2

        # Every run reads back whichever worker answers, each on a new connection.
        for plan_id in plan_ids:
            assert _status(group.base, plan_id) == "succeeded"

        # Each worker counted its own plans; /metrics, from either, sums them.
        sent = len(plan_ids)
        wait_for_sync(
            lambda: (
                _metric(group.base, "toolloop_plans_total", kind="sequential", status="succeeded")
                == sent
            ),
            f"toolloop_plans_total sums to {sent}",
        )
        requests = _metric(
            group.base,
            "toolloop_http_requests_total",
            route="/plans/sequential",
            status_class="2xx",
        )
        assert requests == sent


@pytest.mark.postgres
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_stops_every_worker_and_ends_their_runs_interrupted(
    tmp_path: Path, postgres_url: str, stop: int
) -> None:
    with workers(tmp_path, 2, _env(tmp_path, postgres_url)) as group:
        pids = group.wait_until_serving(2)
        held = _until_each_worker_ran_one(group, pids, _start_held(group.base, hold("h")))
        metrics_directory = Path(_environment(next(iter(pids)))["PROMETHEUS_MULTIPROC_DIR"])
        assert metrics_directory.is_dir()

        assert group.terminate(stop) == 0

        assert all(has_ended(pid) for pid in pids)
        statuses = fetch(postgres_url, "SELECT status FROM runs")
        assert len(statuses) == sum(len(runs) for runs in held.values())
        assert {status for (status,) in statuses} == {"interrupted"}
        assert instance_pids(postgres_url) == set()
        assert not metrics_directory.exists()  # the private directory goes with the service
        assert "Traceback" not in group.server.log()


@pytest.mark.postgres
def test_a_worker_killed_is_replaced_and_its_runs_end_interrupted(
    tmp_path: Path, postgres_url: str
) -> None:
    env = _env(tmp_path, postgres_url, heartbeat_interval_s="1", instance_stale_after_s="3")
    with workers(tmp_path, 2, env) as group:
        pids = group.wait_until_serving(2)
        held = _until_each_worker_ran_one(group, pids, _start_held(group.base, gate("g", "open")))
        victim, survivor = sorted(held)
        in_flight = sum(len(runs) for runs in held.values())
        wait_for_sync(
            lambda: _metric(group.base, "toolloop_calls_in_flight", tool="gate") == in_flight,
            "every gated call in flight",
        )

        killed_at = time.monotonic()
        group.kill_worker(victim)

        # The service keeps answering, by the other worker and then the new one too.
        answered = httpx.post(f"{group.base}/plans/sequential", json=sequential(step("s")))
        assert answered.json()["status"] == "succeeded"
        wait_for_sync(
            lambda: {_status(group.base, run) for run in held[victim]} == {"interrupted"},
            "the killed worker's runs interrupted",
        )
        print(f"killed worker's runs interrupted after {time.monotonic() - killed_at:.1f} s")
        assert {_status(group.base, run) for run in held[survivor]} == {"running"}

        replaced = group.wait_until_serving(2)
        assert victim not in replaced
        assert survivor in replaced
        # The dead worker's in-flight calls left /metrics with it.
        wait_for_sync(
            lambda: (
                _metric(group.base, "toolloop_calls_in_flight", tool="gate") == len(held[survivor])
            ),
            "only the survivor's calls in flight",
        )

        (tmp_path / "open").touch()
        wait_for_sync(lambda: {_status(group.base, run) for run in held[survivor]} == {"succeeded"})
        assert {_status(group.base, run) for run in held[victim]} == {"interrupted"}


def _environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (entry.decode().split("=", 1) for entry in raw if b"=" in entry)
    return {pair[0]: pair[1] for pair in pairs}
