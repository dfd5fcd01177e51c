"""What the client sends and when it sends it again, against a scripted service
(`httpx.MockTransport`): one Idempotency-Key per plan, reused on every retry; retries only
on 503/429 and on connections that never carried the request."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import httpx
import pytest

from toolloop.client import (
    AsyncClient,
    Client,
    ConnectionLost,
    ProblemError,
    RetriesExhausted,
    RetryPolicy,
    Unreachable,
)

FAST = RetryPolicy(max_attempts=4, backoff_s=0.0, max_delay_s=0.0)
CALLS = [{"call_key": "1", "tool": "step", "args": {"label": "x"}}]
RECEIPT = {
    "receipt_id": "r1", "plan_id": "p1", "call_key": "1", "item_key": None, "tool": "step",
    "status": "succeeded", "output": {"label": "x"}, "error": None, "attempts": 1,
    "cache_hit": False, "fingerprint": "sha256:0", "started_at": "2026-12-07T00:00:00Z",
    "finished_at": "2026-12-07T00:00:01Z", "duration_ms": 1.0,
}  # fmt: skip
PLAN = {"plan_id": "p1", "kind": "sequential", "status": "succeeded",
        "contract_hash": "sha256:c", "receipts": [RECEIPT]}  # fmt: skip
UNAVAILABLE = {"type": "urn:toolloop:problem:storage-unavailable", "title": "Service Unavailable",
               "status": 503, "detail": "The database is unavailable; retry later."}  # fmt: skip
NOT_FOUND = {"type": "urn:toolloop:problem:not-found", "title": "Not Found", "status": 404,
             "detail": "There is no run with this id."}  # fmt: skip


Handler = Callable[[httpx.Request], httpx.Response]


def scripted(
    *answers: Callable[[httpx.Request], httpx.Response],
) -> tuple[Handler, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers[min(len(seen), len(answers)) - 1](request)

    return handle, seen


def answer(status: int, body: object, **headers: str) -> Handler:
    media = "application/problem+json" if status >= 400 else "application/json"
    return lambda _: httpx.Response(status, json=body, headers={"content-type": media, **headers})


def refuse_connection(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def drop_after_sending(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadError("connection reset by peer", request=request)


def client_for(handler: Handler, retry: RetryPolicy = FAST) -> Client:
    return Client("http://toolloop.test", retry=retry, transport=httpx.MockTransport(handler))


def test_a_plan_is_retried_after_503_and_refused_connections_under_one_key() -> None:
    handler, seen = scripted(
        refuse_connection, answer(503, UNAVAILABLE, **{"retry-after": "0"}), answer(200, PLAN)
    )
    with client_for(handler) as client:
        result = client.run_sequential("faults", CALLS, context={"trace_id": "t"})

    keys = {request.headers["idempotency-key"] for request in seen}
    assert len(seen) == 3
    assert keys == {result.idempotency_key}
    assert json.loads(seen[-1].content) == {
        "owner": "faults",
        "calls": CALLS,
        "context": {"trace_id": "t"},
    }
    assert result.status == "succeeded"
    assert result.receipts[0].output == {"label": "x"}
    assert result.receipts[0].finished_at is not None


def test_two_plans_get_two_keys_and_a_given_key_is_sent_as_it_is() -> None:
    handler, seen = scripted(answer(200, PLAN))
    with client_for(handler) as client:
        client.run_sequential("faults", CALLS)
        client.run_sequential("faults", CALLS)
        client.run_sequential("faults", CALLS, idempotency_key="mine")
    first, second, third = (r.headers["idempotency-key"] for r in seen)
    assert first != second
    assert third == "mine"


def test_a_request_lost_after_it_was_sent_is_not_sent_again() -> None:
    handler, seen = scripted(drop_after_sending, answer(200, PLAN))
    with client_for(handler) as client, pytest.raises(ConnectionLost) as lost:
        client.run_sequential("faults", CALLS)
    assert len(seen) == 1
    assert lost.value.idempotency_key == seen[0].headers["idempotency-key"]


def test_a_read_lost_after_it_was_sent_is_read_again() -> None:
    run = {"run_id": "p1", "kind": "sequential", "owner": "faults", "status": "succeeded",
           "caller": None, "call_count": 1, "created_at": "2026-12-07T00:00:00Z"}  # fmt: skip
    handler, seen = scripted(drop_after_sending, answer(200, run))
    with client_for(handler) as client:
        assert client.get_run("p1").status == "succeeded"
    assert len(seen) == 2


def test_retries_end_where_the_policy_ends() -> None:
    handler, seen = scripted(answer(429, {**UNAVAILABLE, "status": 429}, **{"retry-after": "0"}))
    with client_for(handler) as client, pytest.raises(RetriesExhausted) as exhausted:
        client.run_sequential("faults", CALLS)
    assert len(seen) == FAST.max_attempts
    assert exhausted.value.status == 429

    handler, seen = scripted(refuse_connection)
    with client_for(handler) as client, pytest.raises(Unreachable):
        client.tools()
    assert len(seen) == FAST.max_attempts


def test_a_refusal_is_not_retried_and_carries_the_problem() -> None:
    rejected = {
        "type": "urn:toolloop:problem:plan-rejected", "title": "Unprocessable Content",
        "status": 422, "detail": "The plan was rejected; nothing ran.",
        "errors": [{"pointer": "/calls/0/tool", "message": "unknown tool 'nope'"}],
    }  # fmt: skip
    handler, seen = scripted(answer(422, rejected))
    with client_for(handler) as client, pytest.raises(ProblemError) as refused:
        client.run_sequential("faults", CALLS)
    assert len(seen) == 1
    problem = refused.value.problem
    assert problem.slug == "plan-rejected"
    assert [(e.pointer, e.message) for e in problem.errors] == [
        ("/calls/0/tool", "unknown tool 'nope'")
    ]
    assert problem.body == rejected


def test_retry_after_is_honoured_and_bounded() -> None:
    policy = RetryPolicy(max_attempts=3, backoff_s=0.5, max_delay_s=10.0)
    assert policy.delay(1, "7") == 7.0
    assert policy.delay(1, "600") == 10.0
    assert policy.delay(1, "Wed, 21 Oct 2026 07:28:00 GMT") == 0.5
    assert policy.delay(3) == 2.0
    assert policy.delay(5000) == 10.0


def test_lists_are_iterated_page_by_page() -> None:
    pages = {
        None: {"items": [{**RECEIPT, "receipt_id": "a"}], "next_cursor": "c2"},
        "c2": {"items": [{**RECEIPT, "receipt_id": "b"}], "next_cursor": None},
    }

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    with client_for(handle) as client:
        found = [r.receipt_id for r in client.receipts(tool="step", cache_hit=False)]
    assert found == ["a", "b"]


def test_events_skip_heartbeats_and_a_reconnect_does_not_repeat_receipts() -> None:
    receipt_a = json.dumps({**RECEIPT, "receipt_id": "a"})
    receipt_b = json.dumps({**RECEIPT, "receipt_id": "b"})
    first = f": heartbeat\n\nevent: receipt\ndata: {receipt_a}\n\n"
    second = (
        f"event: receipt\ndata: {receipt_a}\n\nevent: receipt\ndata: {receipt_b}\n\n"
        'event: end\ndata: {"run_id": "p1", "status": "succeeded"}\n\n'
    )
    streams = [first, second]

    def handle(request: httpx.Request) -> httpx.Response:
        # The first stream ends without its `end`, as a dropped connection would.
        return httpx.Response(
            200, content=streams.pop(0).encode(), headers={"content-type": "text/event-stream"}
        )

    with client_for(handle) as client:
        events = list(client.events("p1"))
    assert [(e.kind, e.receipt.receipt_id if e.receipt else e.status) for e in events] == [
        ("receipt", "a"),
        ("receipt", "b"),
        ("end", "succeeded"),
    ]


async def test_the_async_client_retries_under_one_key_too() -> None:
    handler, seen = scripted(answer(503, UNAVAILABLE, **{"retry-after": "0"}), answer(200, PLAN))
    async with AsyncClient(
        "http://toolloop.test", retry=FAST, transport=httpx.MockTransport(handler)
    ) as client:
        result = await client.run_sequential("faults", CALLS)
    assert len({r.headers["idempotency-key"] for r in seen}) == 1
    assert result.receipts[0].status == "succeeded"


async def test_the_async_client_iterates_pages_and_raises_problems() -> None:
    pages = {
        None: {"items": [{**RECEIPT, "receipt_id": "a"}], "next_cursor": "c2"},
        "c2": {"items": [{**RECEIPT, "receipt_id": "b"}], "next_cursor": None},
    }

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/runs/gone":
            return answer(404, NOT_FOUND)(request)
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    async with AsyncClient(
        "http://toolloop.test", retry=FAST, transport=httpx.MockTransport(handle)
    ) as client:
        found = [r.receipt_id async for r in client.run_receipts("p1")]
        with pytest.raises(ProblemError) as missing:
            await client.get_run("gone")
    assert found == ["a", "b"]
    assert missing.value.status == 404


def test_an_event_stream_that_keeps_closing_early_ends_in_an_error() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b": heartbeat\n\n")

    with client_for(handle) as client, pytest.raises(ConnectionLost):
        list(client.events("p1"))


def test_the_client_imports_nothing_of_the_service() -> None:
    program = (
        "import sys, toolloop.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('app', 'fastapi')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"
