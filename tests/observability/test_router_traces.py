"""A traced router run: its `chat {model}` spans with token usage, and its calls'
`execute_tool` spans, under the run's span."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.observability.tracing_support import named, one, parent_id, span_id, traced_client
from tests.router.http_support import router_settings, run_body
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text


@pytest.fixture(autouse=True)
def _fresh_tools(fresh_router_tools: None) -> None:
    """Every test here starts with fresh router test tools."""


async def test_a_router_run_has_chat_spans_with_usage_and_tool_spans(
    sqlite_url: str, tmp_path: Path, model: FakeLLM, model_url: str
) -> None:
    model.script(
        openai_calls(("c1", "lookup", {"term": "toolloop"}), prompt_tokens=21, completion_tokens=7),
        openai_text("enough", prompt_tokens=30, completion_tokens=2),
        openai_text("ToolLoop runs tools.", prompt_tokens=40, completion_tokens=9),
    )
    exporter = InMemorySpanExporter()
    settings = router_settings(sqlite_url, tmp_path, model_url)
    async with traced_client(settings, exporter) as client:
        response = await client.post("/router/runs", json=run_body())
    assert response.status_code == 200, response.text
    spans = exporter.get_finished_spans()

    run = one(spans, "run router")
    assert run.attributes is not None
    assert run.attributes["toolloop.run_id"] == response.json()["run_id"]
    assert parent_id(run) == span_id(one(spans, "POST /router/runs"))
    chats = named(spans, "chat scripted-router") + named(spans, "chat scripted-final")
    assert len(chats) == 3
    usage = []
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert parent_id(chat) == span_id(run)
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        usage.append(
            (
                chat.attributes["gen_ai.request.model"],
                chat.attributes["gen_ai.usage.input_tokens"],
                chat.attributes["gen_ai.usage.output_tokens"],
            )
        )
    assert sorted(usage) == [
        ("scripted-final", 40, 9),
        ("scripted-router", 21, 7),
        ("scripted-router", 30, 2),
    ]
    call = one(spans, "execute_tool lookup")
    assert parent_id(call) == span_id(run)
    assert call.attributes is not None
    assert call.attributes["gen_ai.tool.call.id"] == response.json()["receipts"][0]["receipt_id"]


async def test_a_failed_model_request_has_its_error_type(
    sqlite_url: str, tmp_path: Path, model: FakeLLM, model_url: str
) -> None:
    model.reply({"error": "down"}, status=500)
    model.reply({"error": "down"}, status=500)
    exporter = InMemorySpanExporter()
    settings = router_settings(sqlite_url, tmp_path, model_url)
    async with traced_client(settings, exporter) as client:
        await client.post("/router/runs", json=run_body())
    chat = named(exporter.get_finished_spans(), "chat scripted-router")[0]
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "transport_error"
