"""Tools misbehaving: each call gets a correct receipt, stored as such, and the service
stays healthy (probes answer, the next plan runs, worker threads stay bounded)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.foundation.canonical import canonical_json, sha256_digest
from app.foundation.redaction import REDACTED
from app.settings import Settings
from tests.api import misbehaving_tools
from tests.live_server import ServerProcess
from tests.support.app import AppFactory, write_registry
from tests.support.waiting import wait_for

WORKERS = 4
STORED_CAP = 4096
SECRET = "sk-" + "A" * 32


def _tool(function: str, **options: Any) -> dict[str, Any]:
    return {
        "callable": f"tests.api.misbehaving_tools:{function}",
        "description": f"Misbehaves on purpose: {function}.",
        "input_schema": {},
        "output_schema": {},
        **options,
    }


TOOLS = {
    "raising": _tool("raising", effect="read"),
    "araising": _tool("araising", effect="read"),
    "hang_async": _tool("hang_async", timeout_s=0.2),
    "hang_sync": _tool("hang_sync", timeout_s=0.2),
    "quick_sync": _tool("quick_sync", effect="read"),
    "quick_async": _tool("quick_async", effect="read"),
    "invalid_output": _tool(
        "invalid_output", output_schema={"type": "object", "required": ["label"]}
    ),
    "enormous": _tool("enormous", redact=["secret"]),
    "cached_enormous": _tool("enormous", effect="read", cacheable=True),
    "nested_enormous": _tool("nested_enormous"),
    "not_json": _tool("not_json"),
    "json_edge": _tool("json_edge"),
    "noisy": _tool("noisy"),
    "leak_thread": _tool("leak_thread"),
}


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    runner = {"allowed_tools": list(TOOLS), "max_calls": 64, "tool_timeout_s": 10}
    return write_registry(
        tmp_path, {"subagents": {"bad": {"tools": TOOLS, "runner_defaults": runner}}}
    )


@pytest.fixture
def settings(make_app: AppFactory, registry: Path) -> Settings:
    return make_app.settings(registry, worker_threads=WORKERS, max_stored_output_bytes=STORED_CAP)


@pytest.fixture(autouse=True)
def released() -> Iterator[None]:
    misbehaving_tools.reset()
    yield
    misbehaving_tools.release()


async def _plan(
    client: httpx.AsyncClient, *calls: tuple[str, dict[str, Any]], **headers: str
) -> dict[str, Any]:
    body = {
        "owner": "bad",
        "calls": [
            {"call_key": str(index), "tool": tool, "args": args}
            for index, (tool, args) in enumerate(calls)
        ],
    }
    response = await client.post("/plans/sequential", json=body, headers=headers)
    assert response.status_code == 200, response.text
    plan: dict[str, Any] = response.json()
    return plan


async def _stored(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/runs/{run_id}/receipts")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def _still_healthy(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200
    plan = await _plan(client, ("raising", {"kind": "plain"}), ("quick_sync", {"label": "x"}))
    assert [r["status"] for r in plan["receipts"]] == ["failed", "skipped"]
    plan = await _plan(client, ("json_edge", {"kind": "unicode"}))
    assert plan["status"] == "succeeded"


@pytest.mark.parametrize("tool", ["raising", "araising"])
async def test_a_raising_tool_fails_its_call_even_with_system_exit(
    client: httpx.AsyncClient, tool: str
) -> None:
    for kind, message in [
        ("plain", "RuntimeError: the tool failed on purpose (plain)"),
        ("keyboard", "KeyboardInterrupt: a tool raised KeyboardInterrupt"),
        ("system_exit", "SystemExit: 3"),
    ]:
        plan = await _plan(client, (tool, {"kind": kind}))
        (receipt,) = plan["receipts"]
        assert receipt["status"] == "failed"
        assert receipt["error"]["kind"] == "exception"
        assert receipt["error"]["message"] == message
        (stored,) = await _stored(client, plan["plan_id"])
        assert (stored["status"], stored["error"]) == ("failed", receipt["error"])
    await _still_healthy(client)


async def test_a_hanging_async_tool_is_cancelled_at_its_timeout(
    client: httpx.AsyncClient,
) -> None:
    plan = await _plan(client, ("hang_async", {"label": "a"}))
    (receipt,) = plan["receipts"]
    assert (receipt["status"], receipt["error"]["kind"]) == ("timed_out", "timeout")
    (stored,) = await _stored(client, plan["plan_id"])
    assert stored["status"] == "timed_out"
    await _still_healthy(client)


def _tool_threads() -> int:
    return sum(thread.name.startswith("toolloop-tool") for thread in threading.enumerate())


async def test_hung_sync_tools_time_out_and_worker_threads_stay_bounded(
    client: httpx.AsyncClient,
) -> None:
    before = threading.active_count()
    hung = 3 * WORKERS
    for round_ in range(2):
        body = {
            "owner": "bad",
            "max_concurrency": hung,
            "lanes": [
                {
                    "item_key": str(index),
                    "calls": [{"call_key": "1", "tool": "hang_sync", "args": {"label": "h"}}],
                }
                for index in range(hung)
            ],
        }
        response = await client.post("/plans/parallel", json=body)
        assert response.status_code == 200, response.text
        receipts = [lane["receipts"][0] for lane in response.json()["lanes"]]
        assert {(r["status"], r["error"]["kind"]) for r in receipts} == {("timed_out", "timeout")}
        assert _tool_threads() == WORKERS, round_
        assert threading.active_count() <= before + WORKERS + 4, threading.enumerate()
    # Only the calls that got a worker ever started; the queued ones were dropped unrun.
    assert len(misbehaving_tools.entered) == WORKERS

    # Every worker is held: async tools still run, a sync one waits for a thread.
    assert (await _plan(client, ("quick_async", {"label": "a"})))["status"] == "succeeded"
    misbehaving_tools.release()

    async def quick_sync_succeeded() -> dict[str, Any] | None:
        plan = await _plan(client, ("quick_sync", {"label": "after"}))
        return plan if plan["status"] == "succeeded" else None

    plan = await wait_for(quick_sync_succeeded, "a sync tool got a thread again", every_s=0.05)
    assert plan["receipts"][0]["output"]["thread"].startswith("toolloop-tool")
    assert _tool_threads() == WORKERS
    await _still_healthy(client)


async def test_output_failing_its_schema_is_an_output_schema_failure(
    client: httpx.AsyncClient,
) -> None:
    plan = await _plan(client, ("invalid_output", {"label": "x"}))
    (receipt,) = plan["receipts"]
    assert (receipt["status"], receipt["output"]) == ("failed", None)
    assert receipt["error"]["kind"] == "output_schema"
    assert "label" in receipt["error"]["message"]
    (stored,) = await _stored(client, plan["plan_id"])
    assert (stored["status"], stored["output"], stored["output_truncated"]) == (
        "failed",
        None,
        False,
    )


async def test_an_enormous_output_is_returned_whole_and_stored_truncated_with_its_digest(
    client: httpx.AsyncClient,
) -> None:
    size = 5 * 1024 * 1024
    plan = await _plan(client, ("enormous", {"size": size, "secret": SECRET}))
    (receipt,) = plan["receipts"]
    assert receipt["status"] == "succeeded"
    assert receipt["output"] == {"blob": "x" * size, "secret": SECRET}

    (stored,) = await _stored(client, plan["plan_id"])
    redacted_full = {"blob": "x" * size, "secret": REDACTED}
    digest = sha256_digest(canonical_json(redacted_full))
    assert stored["output_truncated"] is True
    assert stored["output_digest"] == digest
    marker = stored["output"]
    assert marker["truncated"] is True
    assert marker["digest"] == digest
    assert marker["size_bytes"] > size
    assert marker["preview"].startswith('{"blob":"xxxx')
    assert len(marker["preview"]) <= STORED_CAP // 4
    assert SECRET not in str(stored)


async def test_small_outputs_are_stored_whole_without_a_digest(
    client: httpx.AsyncClient,
) -> None:
    plan = await _plan(client, ("enormous", {"size": 10, "secret": SECRET}))
    (stored,) = await _stored(client, plan["plan_id"])
    assert stored["output"] == {"blob": "x" * 10, "secret": REDACTED}
    assert (stored["output_truncated"], stored["output_digest"]) == (False, None)


async def test_a_many_row_output_is_truncated_by_its_json_size(client: httpx.AsyncClient) -> None:
    plan = await _plan(client, ("nested_enormous", {"count": 2000}))
    assert len(plan["receipts"][0]["output"]["rows"]) == 2000
    (stored,) = await _stored(client, plan["plan_id"])
    assert stored["output_truncated"] is True
    assert stored["output"]["preview"].startswith('{"rows":[{"id":0,')


async def test_an_output_over_the_cap_is_not_cached(client: httpx.AsyncClient) -> None:
    for _ in range(2):
        plan = await _plan(client, ("cached_enormous", {"size": 2 * STORED_CAP}))
        assert plan["receipts"][0]["cache_hit"] is False
    small = [await _plan(client, ("cached_enormous", {"size": 10})) for _ in range(2)]
    assert [plan["receipts"][0]["cache_hit"] for plan in small] == [False, True]


async def test_an_idempotent_replay_returns_the_truncated_stored_copy(
    client: httpx.AsyncClient,
) -> None:
    call = ("enormous", {"size": 2 * STORED_CAP})
    first = await _plan(client, call, **{"Idempotency-Key": "big-1"})
    replay = await _plan(client, call, **{"Idempotency-Key": "big-1"})
    assert first["receipts"][0]["output"]["blob"] == "x" * (2 * STORED_CAP)
    assert replay["plan_id"] == first["plan_id"]
    assert replay["receipts"][0]["output"]["truncated"] is True


NOT_JSON = {
    "set": "at /value: set is not a JSON value",
    "nested_set": "at /value/tags: set is not a JSON value",
    "datetime": "at /value: datetime is not a JSON value",
    "nested_datetime": "at /value/at/0: datetime is not a JSON value",
    "object": "at /value: _Opaque is not a JSON value",
    "dataclass": "at /value: _Thing is not a JSON value",
    "bytes": "at /value: bytes is not a JSON value",
    "nan": "at /value: nan is not a JSON number",
    "nested_nan": "at /value/score: nan is not a JSON number",
    "inf": "at /value/score: inf is not a JSON number",
    "negative_inf": "at /value/0: -inf is not a JSON number",
    "int_keys": "at /value/counts: object keys must be strings, not int",
    "tuple_keys": "at /value: object keys must be strings, not tuple",
    "cycle": "nested more than 254 levels (or self-referencing)",
    "big_int": "at /value: an integer beyond 64 bits",
    "surrogate": "at /value: a string holds a lone surrogate",
}


async def test_non_json_outputs_fail_their_call_with_a_clear_message(
    client: httpx.AsyncClient,
) -> None:
    calls = [("not_json", {"kind": kind}) for kind in NOT_JSON]
    plans = await asyncio.gather(*(_plan(client, call) for call in calls))
    for kind, plan in zip(NOT_JSON, plans, strict=True):
        (receipt,) = plan["receipts"]
        assert (receipt["status"], receipt["output"]) == ("failed", None), kind
        assert receipt["error"]["kind"] == "output_schema", kind
        message = receipt["error"]["message"]
        assert message.startswith("output is not a JSON value: "), kind
        assert NOT_JSON[kind] in message, (kind, message)
        (stored,) = await _stored(client, plan["plan_id"])
        assert stored["error"] == receipt["error"], kind
    await _still_healthy(client)


JSON_EDGES: dict[str, Any] = {
    "tuple": {"pair": [1, 2]},
    "integral_float": {"n": 2.0},
    "unicode": {"text": "snow \u2603 \U0001f600"},
    "uuid": {"id": "00000000-0000-0000-0000-000000000001"},
    "null": {"missing": None, "score": 0.5},
}


async def test_json_that_is_not_the_plainest_kind_is_accepted(
    client: httpx.AsyncClient,
) -> None:
    for kind, output in JSON_EDGES.items():
        plan = await _plan(client, ("json_edge", {"kind": kind}))
        assert plan["receipts"][0]["output"] == output, kind
        (stored,) = await _stored(client, plan["plan_id"])
        assert stored["output"] == output, kind


async def test_printing_to_stdout_changes_nothing(
    client: httpx.AsyncClient, capfd: pytest.CaptureFixture[str]
) -> None:
    plan = await _plan(client, ("noisy", {"label": "n"}))
    assert plan["receipts"][0]["output"] == {"label": "n"}
    assert "tool output on stdout for n" in capfd.readouterr().out
    (stored,) = await _stored(client, plan["plan_id"])
    assert stored["status"] == "succeeded"
    await _still_healthy(client)


async def test_a_tool_leaking_a_thread_gets_its_receipt(client: httpx.AsyncClient) -> None:
    plans = [await _plan(client, ("leak_thread", {"label": str(n)})) for n in range(3)]
    assert [plan["receipts"][0]["status"] for plan in plans] == ["succeeded"] * 3
    assert sum(t.name.startswith("leaked-") for t in threading.enumerate()) == 3
    await _still_healthy(client)


def test_the_server_stops_on_sigterm_while_tools_hang_and_leak_threads(
    tmp_path: Path, registry: Path
) -> None:
    repo = Path(__file__).resolve().parents[2]
    server = ServerProcess(
        tmp_path,
        ["--registry", str(registry), "--database-url", f"sqlite+aiosqlite:///{tmp_path}/t.db"],
        {"PYTHONPATH": str(repo), "TOOLLOOP_WORKER_THREADS": "2"},
    )
    try:
        server.wait_until_answering()
        for tool in ("hang_sync", "leak_thread"):
            body = {
                "owner": "bad",
                "calls": [{"call_key": "1", "tool": tool, "args": {"label": "x"}}],
            }
            response = httpx.post(f"{server.base}/plans/sequential", json=body, timeout=30)
            assert response.status_code == 200, response.text
        server.process.terminate()
        # A hung worker thread or a leaked non-daemon thread must not keep it alive.
        server.process.wait(timeout=20)
    finally:
        server.stop()
    assert "Application shutdown complete" in server.log()
