"""kill -9 mid-plan: a real `toolloop serve`, killed with its process group, then restarted.

Every run is then succeeded, failed or interrupted, every receipt committed
before the kill is still there, and a resume runs only the calls without a
successful receipt (counted by the tools in a file: the server is another
process), under the same idempotency keys. The time from the restart to the
run showing `interrupted` is printed, not asserted.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.fault_tools import CALL_LOG_ENV, GATE_DIR_ENV
from tests.faults.registry import gate, parallel, read_gate, sequential, server_env, step
from tests.live_server import ServerProcess
from tests.support.waiting import wait_for_sync

ASYNC = {"Prefer": "respond-async"}
ENDED = {"succeeded", "failed", "interrupted"}
SLOW_S = 0.1


@pytest.fixture
def env(tmp_path: Path, registry: Path, database_url: str) -> dict[str, str]:
    extra = {CALL_LOG_ENV: str(tmp_path / "calls.log"), GATE_DIR_ENV: str(tmp_path)}
    return server_env(registry, database_url, **extra)


@pytest.fixture
def start_server(tmp_path: Path, env: dict[str, str]) -> Iterator[Callable[[str], ServerProcess]]:
    started: list[ServerProcess] = []

    def start(log_name: str) -> ServerProcess:
        server = ServerProcess(tmp_path, [], env, log_name=log_name)
        started.append(server)
        server.wait_until_answering()
        return server

    yield start
    for server in started:
        server.stop()


def executions(tmp_path: Path) -> Counter[str]:
    path = tmp_path / "calls.log"
    return Counter(path.read_text().split()) if path.exists() else Counter()


def receipts(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/runs/{run_id}/receipts", params={"limit": 500})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def test_kill_9_mid_plan_loses_nothing_and_resume_runs_only_the_missing_calls(
    tmp_path: Path, start_server: Callable[[str], ServerProcess], database_url: str
) -> None:
    # Slow calls around gates that stay shut until after the kill, so that each run is
    # surely mid-flight: 3 calls done in the sequential plan, 8 of 13 in the parallel one.
    slow = [step(f"s{i}", SLOW_S) for i in range(6)]
    plans = {
        "sequential": sequential(*slow[:3], gate("gate", "after-kill"), *slow[3:]),
        "parallel": parallel(
            {
                "a": [step("a1", SLOW_S), gate("a2", "after-kill"), step("a3", SLOW_S)],
                "b": [step("b1", SLOW_S), step("b2"), gate("b3", "after-kill"), step("b4")],
                "c": [step("c1", SLOW_S), step("c2", SLOW_S), step("c3", SLOW_S)],
                "d": [step("d1", SLOW_S), step("d2", SLOW_S)],
            },
            max_concurrency=3,
        ),
    }
    planned = {"sequential": 7, "parallel": 12}
    committed = {"sequential": 3, "parallel": 8}
    first = start_server("first.log")
    with httpx.Client(base_url=first.base, timeout=10) as client:
        quick = client.post("/plans/sequential", json=sequential(step("quick")))
        assert quick.json()["status"] == "succeeded"
        runs = {
            kind: client.post(f"/plans/{kind}", json=plan, headers=ASYNC).json()["run_id"]
            for kind, plan in plans.items()
        }
        wait_for_sync(
            lambda: all(len(receipts(client, runs[k])) == n for k, n in committed.items())
        )
        seen = {run_id: receipts(client, run_id) for run_id in runs.values()}
    first.kill()
    (tmp_path / "after-kill").touch()
    before_resume = executions(tmp_path)

    restarted_at = time.perf_counter()
    second = start_server("second.log")
    with httpx.Client(base_url=second.base, timeout=30) as client:
        wait_for_sync(
            lambda: client.get(f"/runs/{runs['sequential']}").json()["status"] != "running"
        )
        to_interrupted_s = time.perf_counter() - restarted_at

        listed = client.get("/runs", params={"limit": 100}).json()["items"]
        assert {run["status"] for run in listed} <= ENDED
        assert {run["run_id"]: run["status"] for run in listed} == {
            quick.json()["plan_id"]: "succeeded",
            runs["sequential"]: "interrupted",
            runs["parallel"]: "interrupted",
        }
        lost = 0
        for run_id, committed in seen.items():
            now = {r["receipt_id"]: r for r in receipts(client, run_id)}
            lost += sum(1 for r in committed if now.get(r["receipt_id"]) != r)
        assert lost == 0
        kept = {
            r["idempotency_key"]
            for run_id in runs.values()
            for r in receipts(client, run_id)
            if r["status"] == "succeeded"
        }

        resumed = client.post(f"/runs/{runs['sequential']}/resume", json=plans["sequential"])
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "succeeded"
        accepted = client.post(
            f"/runs/{runs['parallel']}/resume", json=plans["parallel"], headers=ASYNC
        )
        assert accepted.status_code == 202, accepted.text
        wait_for_sync(lambda: client.get(f"/runs/{runs['parallel']}").json()["status"] != "running")

        for kind, run_id in runs.items():
            assert client.get(f"/runs/{run_id}").json()["status"] == "succeeded"
            final = receipts(client, run_id)
            assert sorted(r["seq"] for r in final) == list(range(planned[kind]))
            assert all(r["status"] == "succeeded" for r in final)
            assert all(r["idempotency_key"] == f"{run_id}:{r['seq']}" for r in final)
            by_id = {r["receipt_id"]: r for r in final}
            assert all(r["receipt_id"] in by_id for r in seen[run_id] if r["status"] == "succeeded")

    after_resume = executions(tmp_path)
    planned_keys = {
        f"{run_id}:{seq}" for kind, run_id in runs.items() for seq in range(planned[kind])
    }
    rerun = {key: after_resume[key] - before_resume[key] for key in planned_keys}
    assert all(after_resume[key] == 1 for key in kept)
    assert all(rerun[key] == (0 if key in kept else 1) for key in planned_keys)
    in_flight = sum(1 for key in planned_keys - kept if before_resume[key])
    print(
        f"\nkill -9 ({database_url.split(':')[0]}): runs lost 0, receipts lost {lost} "
        f"of {sum(len(c) for c in seen.values())} seen committed, {len(kept)} kept, "
        f"{sum(rerun.values())} calls run by the resume ({in_flight} were in flight at the kill, "
        f"same idempotency keys); time from restart to interrupted {to_interrupted_s:.2f} s"
    )


def test_kill_9_during_a_waited_for_plan_of_reads_leaves_it_interrupted_and_resumable(
    tmp_path: Path, start_server: Callable[[str], ServerProcess]
) -> None:
    # Such a plan does not wait for its start to commit, but its start commits in the
    # next group commit, while its call runs: a crash mid-call still leaves the run.
    plan = sequential(read_gate("r1", "after-kill"))
    first = start_server("first.log")
    answers: list[BaseException | httpx.Response] = []

    def post() -> None:
        try:
            with httpx.Client(base_url=first.base, timeout=30) as waiting:
                answers.append(waiting.post("/plans/sequential", json=plan))
        except httpx.TransportError as exc:  # the server is killed under it
            answers.append(exc)

    poster = threading.Thread(target=post)
    poster.start()
    with httpx.Client(base_url=first.base, timeout=10) as client:
        wait_for_sync(lambda: len(client.get("/runs", params={"limit": 10}).json()["items"]) == 1)
        (run,) = client.get("/runs", params={"limit": 10}).json()["items"]
    assert run["status"] == "running"
    first.kill()
    poster.join(timeout=30)
    assert len(answers) == 1
    assert isinstance(answers[0], httpx.TransportError)
    (tmp_path / "after-kill").touch()

    second = start_server("second.log")
    with httpx.Client(base_url=second.base, timeout=30) as client:
        wait_for_sync(lambda: client.get(f"/runs/{run['run_id']}").json()["status"] != "running")
        assert client.get(f"/runs/{run['run_id']}").json()["status"] == "interrupted"
        resumed = client.post(f"/runs/{run['run_id']}/resume", json=plan)
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "succeeded"
        (receipt,) = receipts(client, run["run_id"])
        assert receipt["status"] == "succeeded"


def test_a_retry_after_kill_9_learns_its_key_will_never_be_answered(
    tmp_path: Path, start_server: Callable[[str], ServerProcess]
) -> None:
    plan = sequential(step("s1"), gate("g1", "after-kill"))
    key = {"Idempotency-Key": "order-7"}
    first = start_server("first.log")
    answers: list[BaseException | httpx.Response] = []

    def post() -> None:
        try:
            with httpx.Client(base_url=first.base, timeout=30) as waiting:
                answers.append(waiting.post("/plans/sequential", json=plan, headers=key))
        except httpx.TransportError as exc:  # the server is killed under it
            answers.append(exc)

    poster = threading.Thread(target=post)
    poster.start()
    with httpx.Client(base_url=first.base, timeout=10) as client:
        wait_for_sync(lambda: len(executions(tmp_path)) == 2)  # s1 ran, g1 waits at its gate
        busy = client.post("/plans/sequential", json=plan, headers=key)
        (run,) = client.get("/runs", params={"limit": 10}).json()["items"]
    assert busy.status_code == 409
    assert busy.json()["type"] == "urn:toolloop:problem:idempotency-key-in-use"
    assert busy.headers["retry-after"] == "1"
    first.kill()
    poster.join(timeout=30)
    assert isinstance(answers[0], httpx.TransportError)

    second = start_server("second.log")
    with httpx.Client(base_url=second.base, timeout=30) as client:
        wait_for_sync(lambda: client.get(f"/runs/{run['run_id']}").json()["status"] != "running")
        retried = client.post("/plans/sequential", json=plan, headers=key)
        assert retried.status_code == 409, retried.text
        problem = retried.json()
        assert problem["type"] == "urn:toolloop:problem:idempotency-key-unanswered"
        assert f"run {run['run_id']}, which stopped (interrupted)" in problem["detail"]
        assert "retry-after" not in retried.headers  # retrying will not change it
        assert len(client.get("/runs", params={"limit": 10}).json()["items"]) == 1
        assert sorted(executions(tmp_path).values()) == [1, 1]  # the retries ran nothing

        (tmp_path / "after-kill").touch()
        resumed = client.post(f"/runs/{run['run_id']}/resume", json=plan)
        assert resumed.json()["status"] == "succeeded", resumed.text
        again = client.post("/plans/sequential", json=plan, headers=key)
    assert again.status_code == 409
    assert "which stopped (succeeded)" in again.json()["detail"]
    assert sorted(executions(tmp_path).values()) == [1, 2]  # the resume ran g1 again
