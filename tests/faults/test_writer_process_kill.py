"""The database's writer process (SQLite's, PostgreSQL's) killed again and again under a
real `toolloop serve`.

Plans keep coming from a few clients while the writer process is SIGKILLed
again and again, each time once plans are stored again and a process started
after the last kill is running. Every plan answered as succeeded has each of
its receipts stored exactly once; anything else is a 503 problem+json with
`Retry-After` (a batch in flight when its process dies is a dropped
connection: retried, and meanwhile new runs are refused, as in a database
outage); the service starts the process again each time and, once the
retries of the batch the last kill caught have committed it, answers plans
again. The request count, the kills and the time are bounded.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.store.journal.outage import RETRY_WINDOW_S
from tests.faults.registry import sequential, server_env, step
from tests.live_server import ServerProcess

CLIENTS = 4
MAX_PLANS_PER_CLIENT = 1000
KILLS = 5
STORED_BETWEEN_KILLS = 2
# A client's pause after a refusal before it asks again (a poll, not a wait for time).
REFUSED_PAUSE_S = 0.05
RECOVERY_S = RETRY_WINDOW_S + 10  # longer than a batch's retries can last


@pytest.fixture
def server(tmp_path: Path, registry: Path, database_url: str) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path, [], server_env(registry, database_url))
    try:
        server.wait_until_answering()
        yield server
    finally:
        server.stop()


def _writer_pid(server: ServerProcess) -> int | None:
    pid = server.process.pid
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for child in children:
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"sqlite/statements.py" in command or b"postgres/statements.py" in command:
            return int(child)
    return None


def test_plans_never_answer_a_success_the_killed_writer_did_not_store(
    server: ServerProcess,
) -> None:
    answers: list[httpx.Response] = []
    stored: list[None] = []  # one per plan answered as succeeded, as it comes
    killed: list[int] = []
    kills_done = threading.Event()

    def plans(client_id: int) -> None:
        with httpx.Client(base_url=server.base, timeout=60) as client:
            for n in range(MAX_PLANS_PER_CLIENT):
                if kills_done.is_set():
                    return
                keys = (f"c{client_id}-{n}-a", f"c{client_id}-{n}-b")
                answer = client.post("/plans/sequential", json=sequential(*map(step, keys)))
                answers.append(answer)
                if answer.status_code == 200:
                    stored.append(None)
                else:
                    time.sleep(REFUSED_PAUSE_S)

    def process_started_anew_has_stored(wanted: int) -> bool:
        return len(stored) >= wanted and _writer_pid(server) not in (None, *killed)

    def until(condition: Callable[[], bool]) -> bool:
        """Whether `condition` came true within a recovery's length (polled)."""
        deadline = time.monotonic() + RECOVERY_S
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def kill_the_writer() -> None:
        # Each kill waits until plans are stored again and a process started anew
        # is running, however long the last kill's retries take on this machine;
        # the clients stop once each has been answered after the last kill.
        try:
            for _ in range(KILLS):
                wanted = len(stored) + STORED_BETWEEN_KILLS
                if not until(partial(process_started_anew_has_stored, wanted)):
                    return  # the assertions below say what was missing
                pid = _writer_pid(server)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            answered = len(answers) + CLIENTS
            until(lambda: len(answers) >= answered)
        finally:
            kills_done.set()

    threads = [threading.Thread(target=plans, args=(i,)) for i in range(CLIENTS)]
    killer = threading.Thread(target=kill_the_writer)
    for thread in [*threads, killer]:
        thread.start()
    for thread in [killer, *threads]:
        thread.join(timeout=KILLS * (RECOVERY_S + 1))

    assert len(set(killed)) == KILLS, (killed, len(stored))  # each a process started anew
    succeeded = _succeeded_after_refusals(answers)
    assert len(succeeded) >= KILLS * STORED_BETWEEN_KILLS, (len(succeeded), len(answers))
    with httpx.Client(base_url=server.base, timeout=60) as client:
        _assert_each_receipt_stored(client, succeeded)
        # A batch the last kill caught may still be in its retries' backoff: until
        # it commits, new runs are refused, as in a database outage.
        after = _first_plan_answered(client, deadline=time.monotonic() + RECOVERY_S)
        assert after["status"] == "succeeded"
    assert _writer_pid(server) not in (None, *killed)


def _succeeded_after_refusals(answers: list[httpx.Response]) -> list[dict[str, Any]]:
    """The plans answered 200; every other answer must be a 503 problem with `Retry-After`."""
    succeeded = []
    for answer in answers:
        if answer.status_code == 200:
            succeeded.append(answer.json())
            continue
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert "retry-after" in answer.headers
    return succeeded


def _assert_each_receipt_stored(client: httpx.Client, succeeded: list[dict[str, Any]]) -> None:
    for plan in succeeded:
        assert plan["status"] == "succeeded"
        page = client.get(f"/runs/{plan['plan_id']}/receipts", params={"limit": 10})
        assert page.status_code == 200, page.text
        ids = [receipt["receipt_id"] for receipt in page.json()["items"]]
        assert ids == [receipt["receipt_id"] for receipt in plan["receipts"]]


def _first_plan_answered(client: httpx.Client, *, deadline: float) -> dict[str, object]:
    """The first plan the service answers, each refusal before it a 503 with `Retry-After`."""
    refusals = 0
    while True:
        answer = client.post("/plans/sequential", json=sequential(step(f"after-{refusals}")))
        if answer.status_code == 200:
            plan: dict[str, object] = answer.json()
            return plan
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert "retry-after" in answer.headers
        assert time.monotonic() < deadline, f"still refused after {refusals + 1} tries"
        refusals += 1
        time.sleep(REFUSED_PAUSE_S)
