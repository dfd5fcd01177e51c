"""Traces: a request span, the run's span under it, one `execute_tool` span per call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from app.settings import Settings
from tests.observability import obs_tools
from tests.observability.registry import OWNER
from tests.observability.tracing_support import (
    named,
    one,
    parent_id,
    span_id,
    trace_id,
    traced_client,
)

INCOMING_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
INCOMING_PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{INCOMING_TRACE}-{INCOMING_PARENT}-01"
SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"


def plan(*calls: tuple[str, str, dict[str, object]]) -> dict[str, object]:
    return {
        "owner": OWNER,
        "calls": [{"call_key": key, "tool": tool, "args": args} for key, tool, args in calls],
    }


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


async def test_a_plan_request_has_its_run_and_one_span_per_call(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    body = plan(("a", "echo", {"text": "one"}), ("b", "echo", {"text": "two"}))
    async with traced_client(settings, exporter) as client:
        response = await client.post("/plans/sequential", json=body)
        assert response.status_code == 200
    spans = exporter.get_finished_spans()

    request = one(spans, "POST /plans/sequential")
    run = one(spans, "run sequential")
    calls = named(spans, "execute_tool echo")
    assert request.kind is SpanKind.SERVER
    assert request.attributes is not None
    assert request.attributes["http.route"] == "/plans/sequential"
    assert request.attributes["http.response.status_code"] == 200
    assert parent_id(run) == span_id(request)
    assert run.attributes is not None
    assert run.attributes["toolloop.run_id"] == response.json()["plan_id"]
    assert run.attributes["toolloop.run.status"] == "succeeded"
    assert len(calls) == 2
    receipt_ids = [receipt["receipt_id"] for receipt in response.json()["receipts"]]
    for call, receipt_id, key in zip(calls, receipt_ids, ("a", "b"), strict=True):
        assert parent_id(call) == span_id(run)
        assert trace_id(call) == trace_id(request)
        assert call.attributes is not None
        assert call.attributes["gen_ai.operation.name"] == "execute_tool"
        assert call.attributes["gen_ai.tool.name"] == "echo"
        assert call.attributes["gen_ai.tool.call.id"] == receipt_id
        assert call.attributes["toolloop.call_key"] == key
        assert call.status.status_code is StatusCode.UNSET
        assert "error.type" not in call.attributes


async def test_an_incoming_traceparent_is_continued_and_the_run_carries_its_trace_id(
    registry_path: Path, database_url: str, exporter: InMemorySpanExporter
) -> None:
    settings = Settings(registries=[registry_path], database_url=database_url)
    async with traced_client(settings, exporter) as client:
        response = await client.post(
            "/plans/sequential",
            json=plan(("a", "echo", {"text": "one"})),
            headers={"traceparent": TRACEPARENT},
        )
        run_id = response.json()["plan_id"]
        run = (await client.get(f"/runs/{run_id}")).json()
        receipts = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
        listed = (await client.get("/receipts", params={"run_id": run_id})).json()["items"]
    spans = exporter.get_finished_spans()

    request = one(spans, "POST /plans/sequential")
    assert f"{trace_id(request):032x}" == INCOMING_TRACE
    assert request.parent is not None
    assert f"{request.parent.span_id:016x}" == INCOMING_PARENT
    assert f"{trace_id(one(spans, 'execute_tool echo')):032x}" == INCOMING_TRACE
    assert run["trace_id"] == INCOMING_TRACE
    assert [receipt["trace_id"] for receipt in receipts] == [INCOMING_TRACE]
    assert [receipt["trace_id"] for receipt in listed] == [INCOMING_TRACE]
    answered = response.json()
    assert answered["trace_id"] == INCOMING_TRACE
    assert [receipt["trace_id"] for receipt in answered["receipts"]] == [INCOMING_TRACE]


async def test_a_parallel_plans_answer_carries_the_trace_id_on_every_receipt(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    body = {
        "owner": OWNER,
        "max_concurrency": 2,
        "lanes": [
            {"item_key": key, "calls": [{"call_key": "1", "tool": "echo", "args": {"text": key}}]}
            for key in ("x", "y")
        ],
    }
    async with traced_client(settings, exporter) as client:
        answered = (
            await client.post("/plans/parallel", json=body, headers={"traceparent": TRACEPARENT})
        ).json()
        key = {"Idempotency-Key": "traced-replay"}
        first = await client.post("/plans/parallel", json=body, headers=key)
        replayed = await client.post("/plans/parallel", json=body, headers=key)

    assert answered["trace_id"] == INCOMING_TRACE
    traced = [r["trace_id"] for lane in answered["lanes"] for r in lane["receipts"]]
    assert traced == [INCOMING_TRACE, INCOMING_TRACE]
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json()["trace_id"] == first.json()["trace_id"]


async def test_a_failed_call_has_its_error_type_and_status_error(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    body = plan(("a", "leak", {"text": "boom"}), ("b", "echo", {"text": "never"}))
    async with traced_client(settings, exporter) as client:
        response = await client.post("/plans/sequential", json=body)
    assert response.json()["status"] == "failed"
    spans = exporter.get_finished_spans()

    failed = one(spans, "execute_tool leak")
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "exception"
    assert failed.attributes["toolloop.receipt.status"] == "failed"
    run = one(spans, "run sequential")
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes is not None
    assert run.attributes["toolloop.run.status"] == "failed"


async def test_a_timed_out_call_says_timeout(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    async with traced_client(settings, exporter) as client:
        await client.post("/plans/sequential", json=plan(("a", "hang", {"text": "x"})))
    hung = one(exporter.get_finished_spans(), "execute_tool hang")
    assert hung.status.status_code is StatusCode.ERROR
    assert hung.attributes is not None
    assert hung.attributes["error.type"] == "timeout"


async def test_arguments_and_outputs_stay_off_spans_by_default(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    async with traced_client(settings, exporter) as client:
        await client.post("/plans/sequential", json=plan(("a", "echo", {"text": SECRET})))
    for span in exporter.get_finished_spans():
        assert span.attributes is not None
        assert "gen_ai.tool.call.arguments" not in span.attributes
        assert "gen_ai.tool.call.result" not in span.attributes
        assert all(SECRET not in str(value) for value in span.attributes.values())


async def test_opted_in_arguments_and_outputs_are_redacted(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    async with traced_client(settings, exporter, payloads=True) as client:
        await client.post(
            "/plans/sequential", json=plan(("a", "echo", {"text": f"key {SECRET} end"}))
        )
    call = one(exporter.get_finished_spans(), "execute_tool echo")
    assert call.attributes is not None
    assert call.attributes["gen_ai.tool.call.arguments"] == '{"text":"key [REDACTED] end"}'
    assert call.attributes["gen_ai.tool.call.result"] == '{"text":"key [REDACTED] end"}'


async def test_parallel_lanes_have_one_run_span_over_every_call(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    body = {
        "owner": OWNER,
        "max_concurrency": 3,
        "lanes": [
            {"item_key": key, "calls": [{"call_key": "1", "tool": "echo", "args": {"text": key}}]}
            for key in ("x", "y", "z")
        ],
    }
    async with traced_client(settings, exporter) as client:
        assert (await client.post("/plans/parallel", json=body)).status_code == 200
    spans = exporter.get_finished_spans()
    run = one(spans, "run parallel")
    calls = named(spans, "execute_tool echo")
    assert len(calls) == 3
    assert {parent_id(call) for call in calls} == {span_id(run)}
    assert sorted(str((call.attributes or {})["toolloop.item_key"]) for call in calls) == [
        "x",
        "y",
        "z",
    ]


async def test_an_unsampled_request_exports_nothing_and_its_run_keeps_the_trace_id(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    async with traced_client(settings, exporter, sampler=ALWAYS_OFF) as client:
        response = await client.post(
            "/plans/sequential",
            json=plan(("a", "echo", {"text": "one"})),
            headers={"traceparent": TRACEPARENT.removesuffix("01") + "00"},
        )
        assert response.json()["status"] == "succeeded"
        run = (await client.get(f"/runs/{response.json()['plan_id']}")).json()
    assert exporter.get_finished_spans() == ()
    assert run["trace_id"] == INCOMING_TRACE


async def test_without_tracing_runs_carry_no_trace_id(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/plans/sequential",
        json=plan(("a", "echo", {"text": "one"})),
        headers={"traceparent": TRACEPARENT},
    )
    run = (await client.get(f"/runs/{response.json()['plan_id']}")).json()
    assert run["trace_id"] is None
    assert "trace_id" not in response.json()
    assert "trace_id" not in response.json()["receipts"][0]


async def test_a_cancelled_run_ends_its_spans_as_cancelled(
    settings: Settings, exporter: InMemorySpanExporter
) -> None:
    obs_tools.entered, obs_tools.release = asyncio.Event(), asyncio.Event()
    async with traced_client(settings, exporter) as client:
        started = await client.post(
            "/plans/sequential",
            json=plan(("a", "hold", {"text": "x"}), ("b", "echo", {"text": "never"})),
            headers={"Prefer": "respond-async"},
        )
        run_id = started.json()["run_id"]
        await obs_tools.entered.wait()
        cancelled = await client.post(f"/runs/{run_id}/cancel")
        assert cancelled.json()["status"] == "cancelled"
    spans = exporter.get_finished_spans()

    held = one(spans, "execute_tool hold")
    assert held.attributes is not None
    assert held.attributes["error.type"] == "cancelled"
    assert held.status.status_code is StatusCode.ERROR
    run = one(spans, "run sequential")
    assert run.attributes is not None
    assert run.attributes["toolloop.run.status"] == "cancelled"
    assert parent_id(run) == span_id(one(spans, "POST /plans/sequential"))
