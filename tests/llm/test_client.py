from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from app.llm.client import LLMClient
from app.llm.errors import LLMConfigurationError, LLMMalformedResponse, LLMTransportError
from app.llm.messages import Message, ModelReply, ToolCall, ToolDefinition, Usage
from tests.llm.fakes import SECRET, RecordingSleep, anthropic_profile, openai_profile
from tests.support.fake_llm import FakeLLM, openai_body

HELLO = [Message.user("hello")]
TOOLS = [ToolDefinition("lookup", "Look up.", {"type": "object"})]


def ok(model: FakeLLM, text: str = "hi") -> None:
    model.reply(json=openai_body({"role": "assistant", "content": text}))


async def test_openai_round_trip(client: LLMClient, model: FakeLLM) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    model.reply(json=openai_body({"role": "assistant", "content": None, "tool_calls": [call]}))

    reply = await client.complete(openai_profile(), HELLO, TOOLS)

    assert reply == ModelReply("", (ToolCall("c1", "lookup", "{}"),), Usage(11, 7), "stop")
    (request,) = model.requests
    assert request.method == "POST"
    assert str(request.url) == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content)["tools"][0]["function"]["name"] == "lookup"
    assert request.extensions["timeout"] == dict.fromkeys(("connect", "read", "write", "pool"), 5.0)


async def test_anthropic_round_trip(client: LLMClient, model: FakeLLM) -> None:
    model.reply(
        json={
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    )

    reply = await client.complete(anthropic_profile(timeout_s=9), [Message.system("s"), *HELLO])

    assert reply == ModelReply("hi", (), Usage(3, 1), "end_turn")
    (request,) = model.requests
    assert str(request.url) == "https://anthropic.test/v1/messages"
    assert request.headers["x-api-key"] == SECRET
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert json.loads(request.content)["system"] == "s"
    assert request.extensions["timeout"]["read"] == 9


async def test_a_profile_without_a_key_sends_none(client: LLMClient, model: FakeLLM) -> None:
    ok(model)

    await client.complete(openai_profile(api_key_env=None), HELLO)

    assert "authorization" not in model.requests[0].headers


async def test_retries_a_server_error_after_backoff(
    client: LLMClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    model.reply(status=500, text="oops")
    ok(model, "second time")

    reply = await client.complete(openai_profile(), HELLO)

    assert reply.text == "second time"
    assert len(model.requests) == 2
    assert sleep.delays == [1.0]


async def test_honours_retry_after_seconds_on_429(
    client: LLMClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    model.reply(status=429, headers={"retry-after": "7"})
    ok(model)

    await client.complete(openai_profile(), HELLO)

    assert sleep.delays == [7.0]


async def test_honours_retry_after_as_an_http_date(
    http: httpx.AsyncClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now.replace(second=12), usegmt=True)
    client = LLMClient(http, sleep=sleep, clock=now.timestamp, environ={"TEST_LLM_KEY": SECRET})
    model.reply(status=503, headers={"retry-after": later})
    ok(model)

    await client.complete(openai_profile(), HELLO)

    assert sleep.delays == [12.0]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3600"}, 60.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, 1.0),
        ({"retry-after": "-4"}, 1.0),
        ({"retry-after": "Mon, 01 Jan 2001 00:00:00 GMT"}, 0.0),
    ],
)
async def test_retry_after_is_capped_and_bad_values_fall_back_to_backoff(
    client: LLMClient,
    model: FakeLLM,
    sleep: RecordingSleep,
    headers: dict[str, str],
    expected: float,
) -> None:
    model.reply(status=429, headers=headers)
    ok(model)

    await client.complete(openai_profile(), HELLO)

    assert sleep.delays == [expected]


@pytest.mark.parametrize(
    "fault",
    [
        httpx.ConnectError("connection refused"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("peer closed connection"),
    ],
)
async def test_retries_transport_faults(
    client: LLMClient, model: FakeLLM, sleep: RecordingSleep, fault: Exception
) -> None:
    model.script(fault)
    ok(model)

    reply = await client.complete(openai_profile(), HELLO)

    assert reply.text == "hi"
    assert sleep.delays == [1.0]


async def test_does_not_retry_a_client_error(
    client: LLMClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    model.reply(status=400, json={"error": {"message": "max_tokens is too large"}})

    with pytest.raises(LLMTransportError) as caught:
        await client.complete(openai_profile(), HELLO)

    error = caught.value
    assert (error.attempts, error.status, error.profile) == (1, 400, "router-small")
    assert "after 1 attempt: HTTP 400" in str(error)
    assert "max_tokens is too large" in str(error)
    assert len(model.requests) == 1
    assert sleep.delays == []


async def test_retries_are_bounded(
    client: LLMClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    for _ in range(3):
        model.reply(status=503, text="overloaded")

    with pytest.raises(LLMTransportError) as caught:
        await client.complete(openai_profile(), HELLO)

    assert (caught.value.attempts, caught.value.status) == (3, 503)
    assert str(caught.value) == (
        "model profile 'router-small': POST http://llm.test/v1/chat/completions "
        "failed after 3 attempts: HTTP 503: overloaded"
    )
    assert len(model.requests) == 3
    assert sleep.delays == [1.0, 2.0]


async def test_backoff_grows_up_to_its_cap(
    http: httpx.AsyncClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    client = LLMClient(http, max_attempts=5, backoff_s=1.0, backoff_max_s=4.0, sleep=sleep)
    for _ in range(5):
        model.script(httpx.ConnectError("refused"))

    with pytest.raises(LLMTransportError) as caught:
        await client.complete(openai_profile(api_key_env=None), HELLO)

    assert caught.value.status is None
    assert caught.value.cause == "ConnectError: refused"
    assert sleep.delays == [1.0, 2.0, 4.0, 4.0]


async def test_a_whole_attempt_is_bounded_by_the_profile_timeout(
    http: httpx.AsyncClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    async def never_answers(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    client = LLMClient(http, max_attempts=1, sleep=sleep)
    model.script(never_answers)

    with pytest.raises(LLMTransportError, match=r"no complete answer within 0\.01s"):
        await client.complete(openai_profile(api_key_env=None, timeout_s=0.01), HELLO)


async def test_a_malformed_answer_is_not_retried(
    client: LLMClient, model: FakeLLM, sleep: RecordingSleep
) -> None:
    model.reply(json={"choices": []})

    with pytest.raises(LLMMalformedResponse) as caught:
        await client.complete(openai_profile(), HELLO)

    assert str(caught.value) == (
        "model profile 'router-small': malformed model response: choices is empty"
    )
    assert caught.value.profile == "router-small"
    assert len(model.requests) == 1


async def test_an_oversized_answer_is_refused(http: httpx.AsyncClient, model: FakeLLM) -> None:
    client = LLMClient(http, max_response_bytes=100)
    model.reply(json=openai_body({"content": "x" * 200}))

    with pytest.raises(LLMMalformedResponse, match="larger than 100 bytes"):
        await client.complete(openai_profile(api_key_env=None), HELLO)


@pytest.mark.parametrize("value", [None, "", "   "])
async def test_a_missing_key_fails_before_any_request(
    client: LLMClient, model: FakeLLM, environ: dict[str, str], value: str | None
) -> None:
    environ.pop("TEST_LLM_KEY")
    if value is not None:
        environ["TEST_LLM_KEY"] = value

    with pytest.raises(LLMConfigurationError, match=r"TEST_LLM_KEY \(api_key_env\) is not set"):
        await client.complete(openai_profile(), HELLO)
    assert model.requests == []


async def test_a_key_that_cannot_be_a_header_is_refused_without_showing_it(
    client: LLMClient, environ: dict[str, str]
) -> None:
    environ["TEST_LLM_KEY"] = f"{SECRET}\nX-Injected: 1"

    with pytest.raises(LLMConfigurationError) as caught:
        await client.complete(openai_profile(), HELLO)
    assert SECRET not in str(caught.value)


async def test_the_key_is_read_at_call_time(
    client: LLMClient, model: FakeLLM, environ: dict[str, str]
) -> None:
    ok(model)
    ok(model)

    await client.complete(openai_profile(), HELLO)
    environ["TEST_LLM_KEY"] = "sk-rotated"
    await client.complete(openai_profile(), HELLO)

    assert [r.headers["authorization"] for r in model.requests] == [
        f"Bearer {SECRET}",
        "Bearer sk-rotated",
    ]


async def test_the_key_never_appears_in_errors_or_logs(
    client: LLMClient, model: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    echo = f"invalid key {SECRET}"
    model.reply(status=500, text=echo)
    model.reply(status=500, text=echo)
    model.reply(status=401, json={"error": echo})

    with caplog.at_level(logging.DEBUG), pytest.raises(LLMTransportError) as caught:
        await client.complete(anthropic_profile(), HELLO)

    assert caught.value.status == 401
    assert "[redacted]" in str(caught.value)
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(caught.value)
    assert len([r for r in caplog.records if r.name == "app.llm.client"]) == 2
    assert all(SECRET not in record.getMessage() for record in caplog.records)


async def test_an_unknown_provider_is_a_configuration_error(client: LLMClient) -> None:
    profile = openai_profile(provider="cohere")

    with pytest.raises(LLMConfigurationError, match="unknown provider 'cohere'"):
        await client.complete(profile, HELLO)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"backoff_s": -1}, {"retry_after_max_s": -1}, {"max_response_bytes": 0}],
)
def test_the_retry_policy_is_validated(http: httpx.AsyncClient, kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        LLMClient(http, **kwargs)  # type: ignore[arg-type]
