"""The client against a real `toolloop serve` on 127.0.0.1: plans, reads, live events,
cancelling, and retries across a restart that never run a plan twice (the tools count
their calls in a file, since the service is another process)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.console.console_registry import write_registry as write_console_registry
from tests.faults.fault_tools import CALL_LOG_ENV, GATE_DIR_ENV
from tests.faults.registry import gate, server_env, step, write_registry
from tests.live_server import REPO, ServerProcess, free_port
from tests.support.waiting import wait_for_sync
from toolloop.client import (
    AsyncClient,
    Client,
    ConnectionLost,
    PlanResult,
    ProblemError,
    RetryPolicy,
    UnansweredRequest,
)

# Bounds on the waits (the machine may be busy), not timing assertions.
PATIENT = RetryPolicy(max_attempts=1200, backoff_s=0.05, max_delay_s=0.1)
Start = Callable[..., ServerProcess]


@pytest.fixture
def start_server(tmp_path: Path, database_url: str) -> Iterator[Start]:
    """Start `toolloop serve` (the fault tools' registry) on `port`; every start in a test
    shares one database and one call log."""
    env = server_env(
        write_registry(tmp_path),
        database_url,
        **{CALL_LOG_ENV: str(tmp_path / "calls.log"), GATE_DIR_ENV: str(tmp_path)},
    )
    started: list[ServerProcess] = []

    def start(port: int | None = None, *, wait: bool = True) -> ServerProcess:
        server = ServerProcess(tmp_path, [], env, log_name=f"server{len(started)}.log", port=port)
        started.append(server)
        if wait:
            server.wait_until_answering()
        return server

    yield start
    for server in started:
        server.stop()


def executions(tmp_path: Path) -> Counter[str]:
    log = tmp_path / "calls.log"
    return Counter(log.read_text().split()) if log.exists() else Counter()


def test_plans_reads_and_refusals(start_server: Start) -> None:
    server = start_server()
    with Client(server.base) as client:
        done = client.run_sequential("faults", [step("a"), step("b")], context={"trace_id": "t"})
        lanes = [{"item_key": k, "calls": [step("1")]} for k in ("x", "y", "z")]
        fanned = client.run_parallel("faults", lanes, max_concurrency=2)
        with pytest.raises(ProblemError) as refused:
            client.run_sequential("faults", [{"call_key": "1", "tool": "nope", "args": {}}])

        assert done.status == "succeeded"
        assert [r.output for r in done.receipts] == [{"label": "a"}, {"label": "b"}]
        assert [lane.item_key for lane in fanned.lanes] == ["x", "y", "z"]
        assert refused.value.status == 422
        assert [e.pointer for e in refused.value.problem.errors] == ["/calls/0/tool"]

        run = client.get_run(done.run_id)
        assert (run.kind, run.status, run.call_count) == ("sequential", "succeeded", 2)
        assert [r.call_key for r in client.run_receipts(done.run_id, limit=1)] == ["a", "b"]
        assert {r.run_id for r in client.runs(limit=1)} == {done.run_id, fanned.run_id}
        assert len(list(client.receipts(tool="step", limit=2))) == 5
        assert any(e.kind for e in client.audit(done.run_id))
        assert "faults" in str(client.tools())


def test_a_background_run_is_followed_live_and_cancelled(
    start_server: Start, tmp_path: Path
) -> None:
    server = start_server()
    with Client(server.base) as client:
        accepted = client.start_sequential("faults", [step("a"), gate("g", "open-g"), step("c")])
        events = client.events(accepted.run_id)
        first = next(events)
        (tmp_path / "open-g").touch()
        rest = list(events)
        held = client.start_sequential("faults", [gate("g", "never")])
        cancelled = client.cancel(held.run_id)

    assert accepted.status == "running"
    assert first.receipt is not None
    assert first.receipt.call_key == "a"
    assert [e.receipt.call_key for e in rest if e.receipt] == ["g", "c"]
    assert rest[-1].status == "succeeded"
    assert cancelled == "cancelled"


async def test_the_async_client_runs_and_waits(start_server: Start) -> None:
    server = start_server()
    async with AsyncClient(server.base) as client:
        accepted = await client.start_sequential("faults", [step("a", 0.05), step("b")])
        run = await client.wait(accepted.run_id)
        stored = [r.call_key async for r in client.run_receipts(accepted.run_id)]
    assert run.status == "succeeded"
    assert stored == ["a", "b"]


def test_a_plan_sent_while_the_service_restarts_runs_once(
    start_server: Start, tmp_path: Path
) -> None:
    port = free_port()
    start_server(port).stop()  # migrated, then down: the client finds nobody listening
    refused = threading.Event()

    class Watching(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            try:
                return super().handle_request(request)
            except httpx.ConnectError:
                refused.set()
                raise

    answers: list[object] = []

    def send() -> None:
        with Client(f"http://127.0.0.1:{port}", retry=PATIENT, transport=Watching()) as client:
            answers.append(client.run_sequential("faults", [step("once")]))

    # The client waits in a thread; the server starts from this one, which outlives it
    # (a child started from a thread would end with that thread).
    sender = threading.Thread(target=send)
    sender.start()
    assert refused.wait(120)
    start_server(port, wait=False)
    sender.join(timeout=180)
    (result,) = answers
    assert isinstance(result, PlanResult)

    assert refused.is_set()
    assert result.status == "succeeded"
    assert sum(executions(tmp_path).values()) == 1


def test_a_plan_whose_answer_was_lost_in_a_crash_is_not_run_again(
    start_server: Start, tmp_path: Path
) -> None:
    port = free_port()
    first = start_server(port)
    calls = [step("before"), gate("g", "after-crash"), step("after")]
    lost: list[ConnectionLost] = []

    def send() -> None:
        with Client(first.base) as client:
            try:
                client.run_sequential("faults", calls)
            except ConnectionLost as exc:
                lost.append(exc)

    def first_receipt_stored() -> bool:
        with Client(first.base) as reader:
            return any(
                next(reader.run_receipts(run.run_id), None) is not None for run in reader.runs()
            )

    sender = threading.Thread(target=send)
    sender.start()
    # The crash comes once the gate's call has begun and the call before it is stored
    # (a receipt not yet committed at the crash runs again on resume, by design).
    wait_for_sync(lambda: len(executions(tmp_path)) == 2, "the gate's call begins")
    wait_for_sync(first_receipt_stored, "the first call's receipt is stored")
    first.kill()
    sender.join(timeout=60)
    (tmp_path / "after-crash").touch()
    second = start_server(port)
    with Client(second.base) as client:
        (connection_lost,) = lost
        with pytest.raises(UnansweredRequest) as unanswered:
            client.run_sequential("faults", calls, idempotency_key=connection_lost.idempotency_key)
        run_id = unanswered.value.run_id
        assert run_id is not None
        assert client.get_run(run_id).status == "interrupted"
        resumed = client.resume(run_id, {"owner": "faults", "calls": calls})
        runs = list(client.runs())

    assert resumed.status == "succeeded"
    assert [run.run_id for run in runs] == [run_id]
    ran = executions(tmp_path)
    assert len(ran) == 3
    assert sorted(ran.values()) == [1, 1, 2]  # only the call cut off by the crash ran again


def test_a_waiting_call_is_listed_and_approved_through_the_client(
    tmp_path: Path, database_url: str
) -> None:
    env = {
        "TOOLLOOP_REGISTRIES": str(write_console_registry(tmp_path)),
        "TOOLLOOP_DATABASE_URL": database_url,
        "TOOLLOOP_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(REPO),
    }
    server = ServerProcess(tmp_path, [], env)
    try:
        server.wait_until_answering()
        with Client(server.base) as client:
            paused = client.run_sequential(
                "desk", [{"call_key": "p", "tool": "pay", "args": {"text": "5"}}]
            )
            (waiting,) = client.confirmations()
            answer = client.decide(
                paused.run_id, waiting.confirmation_id, approve=True, reason="ok"
            )
            run = client.wait(paused.run_id)
            (receipt,) = client.run_receipts(paused.run_id)
    finally:
        server.stop()

    assert paused.status == "pending"
    assert [p.tool for p in paused.pending] == ["pay"]
    assert waiting.confirmation_id == paused.pending[0].confirmation_id
    assert waiting.args == {"text": "5"}
    assert answer["decision"] == "approved"
    assert run.status == "succeeded"
    assert receipt.status == "succeeded"
