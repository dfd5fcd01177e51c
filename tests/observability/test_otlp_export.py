"""End to end: a real `toolloop serve` exports its spans over OTLP/HTTP to a receiver
on 127.0.0.1, continuing the caller's `traceparent`."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.observability.otel_tracing import service_resource
from tests.live_server import ServerProcess
from tests.observability.otlp_receiver import otlp_receiver

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_REGISTRY = REPO / "registries" / "example.yml"
INCOMING_TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{INCOMING_TRACE}-b7ad6b7169203331-01"
PLAN = {
    "owner": "text-worker",
    "calls": [
        {"call_key": "n", "tool": "normalize_text", "args": {"text": "  a  b "}},
        {"call_key": "w", "tool": "word_count", "args": {"text": "a b c"}},
    ],
}


def test_a_served_plan_exports_its_spans_over_otlp_http(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        server = ServerProcess(
            tmp_path,
            [],
            {
                "TOOLLOOP_REGISTRIES": str(EXAMPLE_REGISTRY),
                "TOOLLOOP_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'toolloop.db'}",
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "50",
                "OTEL_SERVICE_NAME": "toolloop-under-test",
            },
        )
        try:
            server.wait_until_answering()
            response = httpx.post(
                f"{server.base}/plans/sequential",
                json=PLAN,
                headers={"traceparent": TRACEPARENT},
                timeout=30,
            )
            assert response.status_code == 200, response.text
            run_id = response.json()["plan_id"]
            run = httpx.get(f"{server.base}/runs/{run_id}", timeout=30).json()

            (request,) = receiver.wait_for("POST /plans/sequential")
            (run_span,) = receiver.wait_for("run sequential")
            (normalize,) = receiver.wait_for("execute_tool normalize_text")
            (count,) = receiver.wait_for("execute_tool word_count")
        finally:
            server.stop()

    assert run["trace_id"] == INCOMING_TRACE
    assert {span.trace_id for span in (request, run_span, normalize, count)} == {INCOMING_TRACE}
    assert request.parent_span_id == "b7ad6b7169203331"
    assert run_span.parent_span_id == request.span_id
    assert run_span.attributes["toolloop.run_id"] == run_id
    assert normalize.parent_span_id == count.parent_span_id == run_span.span_id
    assert normalize.attributes["gen_ai.operation.name"] == "execute_tool"
    assert normalize.attributes["gen_ai.tool.name"] == "normalize_text"
    receipt_ids = [receipt["receipt_id"] for receipt in response.json()["receipts"]]
    assert [
        normalize.attributes["gen_ai.tool.call.id"],
        count.attributes["gen_ai.tool.call.id"],
    ] == (receipt_ids)
    assert request.resource["service.name"] == "toolloop-under-test"


def test_the_service_is_named_toolloop_unless_the_variables_name_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert service_resource().attributes["service.name"] == "toolloop"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes")
    assert service_resource().attributes["service.name"] == "from-attributes"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-name")
    assert service_resource().attributes["service.name"] == "from-name"
