"""Two real `toolloop serve` processes on one PostgreSQL database hold a tool's
`max_concurrency` and `rate_limit` together, and a replica killed with -9 gives
its slots back to the other."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.store.database import postgres_conninfo
from tests.conftest import _scratch_postgres_database
from tests.live_server import ServerProcess
from tests.service.shared_limits_tools import PROBE_DSN_ENV, PROBE_TABLES
from tests.store.shared_limits.test_buckets import most_in_any_window
from tests.support.replicas import replicas, serve_env
from tests.support.waiting import wait_for_sync

pytestmark = pytest.mark.postgres

SLOTS = 2
PER_SECOND, BURST = 5.0, 2

REGISTRY = f"""\
subagents:
  limits:
    tools:
      occupy:
        callable: tests.service.shared_limits_tools:occupy
        description: Hold a slot for a while.
        input_schema:
          type: object
          properties: {{hold_s: {{type: number, minimum: 0, maximum: 120}}}}
          required: [hold_s]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: idempotent
        max_concurrency: {SLOTS}
      paced:
        callable: tests.service.shared_limits_tools:paced
        description: Start, paced by the rate limit.
        input_schema:
          type: object
          properties: {{label: {{type: string}}}}
          required: [label]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: idempotent
        rate_limit: {{per_second: {PER_SECOND:g}, burst: {BURST}}}
    runner_defaults:
      allowed_tools: [occupy, paced]
      max_calls: 100
      tool_timeout_s: 120
"""


def with_probe_tables(database_url: str) -> str:
    dsn = postgres_conninfo(database_url)
    assert dsn is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in PROBE_TABLES:
            conn.execute(statement)
    return dsn


def start_replicas(workdir: Path, database_url: str, dsn: str) -> Any:
    registry = workdir / "limits.yml"
    registry.write_text(REGISTRY)
    return replicas(workdir, 2, {**serve_env(database_url, [registry]), PROBE_DSN_ENV: dsn})


@pytest.fixture(scope="module")
def shared_database() -> Iterator[str]:
    """One database for the tests that only read the probe, so that they share replicas
    (starting two servers is most of their time)."""
    yield from _scratch_postgres_database()


@pytest.fixture(scope="module")
def probe_dsn(shared_database: str) -> str:
    return with_probe_tables(shared_database)


@pytest.fixture(scope="module")
def two_replicas(
    tmp_path_factory: pytest.TempPathFactory, shared_database: str, probe_dsn: str
) -> Iterator[list[ServerProcess]]:
    with start_replicas(tmp_path_factory.mktemp("replicas"), shared_database, probe_dsn) as servers:
        yield servers


def probe(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def lanes(tool: str, count: int, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "owner": "limits",
        "max_concurrency": count,
        "lanes": [
            {"item_key": f"l{i}", "calls": [{"call_key": "1", "tool": tool, "args": args}]}
            for i in range(count)
        ],
    }


def run_plan(base: str, plan: dict[str, Any]) -> dict[str, Any]:
    with httpx.Client(base_url=base, timeout=120) as client:
        response = client.post("/plans/parallel", json=plan)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def call_started_elsewhere(base: str, other_run: str) -> bool:
    """A running run besides `other_run` has a call past its checks, at admission (its
    `call.started` is audited before it waits for a slot)."""
    with httpx.Client(base_url=base, timeout=10) as client:
        runs = client.get("/runs", params={"status": "running"}).json()["items"]
        for run in runs:
            if run["run_id"] == other_run:
                continue
            audit = client.get(f"/runs/{run['run_id']}/audit").json()["items"]
            if any(event["kind"] == "call.started" for event in audit):
                return True
    return False


def statuses(answer: dict[str, Any]) -> set[str]:
    return {receipt["status"] for lane in answer["lanes"] for receipt in lane["receipts"]}


def test_two_replicas_never_run_more_than_the_tools_slots_at_once(
    two_replicas: list[ServerProcess], probe_dsn: str
) -> None:
    plan = lanes("occupy", 6, {"hold_s": 0.15})

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(run_plan, [s.base for s in two_replicas] * 2, [plan] * 4))

    assert all(statuses(answer) == {"succeeded"} for answer in answers)
    [(running, peak)] = probe(probe_dsn, "SELECT running, peak FROM probe_occupancy")
    assert (running, peak) == (0, SLOTS)


def test_two_replicas_share_one_rate_limit(
    two_replicas: list[ServerProcess], probe_dsn: str
) -> None:
    plan = lanes("paced", 8, {"label": "x"})

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(run_plan, [s.base for s in two_replicas], [plan] * 2))

    assert all(statuses(answer) == {"succeeded"} for answer in answers)
    starts = [float(at) for (at,) in probe(probe_dsn, "SELECT at FROM probe_starts")]
    assert len(starts) == 16
    # A start lands after its token is due, by the server's lateness: one token of slack.
    assert most_in_any_window(starts, PER_SECOND, BURST) <= 1.0
    # Each replica alone would start its own burst at once: 2 * BURST together.
    assert max(starts) - min(starts) >= (16 - BURST - 1) / PER_SECOND


def test_a_replica_killed_with_its_slots_held_gives_them_to_the_other(
    tmp_path: Path, postgres_url: str
) -> None:
    probe_dsn = with_probe_tables(postgres_url)
    with start_replicas(tmp_path, postgres_url, probe_dsn) as (doomed, survivor):
        kill_while_holding_slots(doomed, survivor, probe_dsn)


def kill_while_holding_slots(
    doomed: ServerProcess, survivor: ServerProcess, probe_dsn: str
) -> None:
    running = "SELECT running FROM probe_occupancy"
    with httpx.Client(base_url=doomed.base, timeout=10) as client:
        response = client.post(
            "/plans/parallel",
            json=lanes("occupy", SLOTS, {"hold_s": 110}),
            headers={"Prefer": "respond-async"},
        )
        assert response.status_code == 202, response.text
        doomed_run = response.json()["run_id"]
    wait_for_sync(lambda: probe(probe_dsn, running) == [(SLOTS,)], "the doomed holds both slots")

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(run_plan, survivor.base, lanes("occupy", 1, {"hold_s": 0}))
        wait_for_sync(
            lambda: call_started_elsewhere(survivor.base, doomed_run),
            "the survivor's call is at admission",
        )
        killed_at = datetime.now(UTC)
        doomed.kill()
        answer = waiting.result(timeout=60)

    [lane] = answer["lanes"]
    [receipt] = lane["receipts"]
    assert receipt["status"] == "succeeded"
    # It waited for a slot and ran once the killed replica's session ended, within
    # 30 s of the kill (DESIGN.md section 8).
    assert receipt["admission_wait_ms"] > 0
    finished_at = datetime.fromisoformat(receipt["finished_at"])
    assert killed_at <= finished_at < killed_at + timedelta(seconds=30)
