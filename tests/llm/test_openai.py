from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from app.llm import openai
from app.llm.errors import LLMMalformedResponse
from app.llm.messages import Message, ModelReply, ToolCall, ToolDefinition, Usage
from tests.llm.fakes import SECRET, openai_profile
from tests.support.fake_llm import openai_body

LOOKUP = ToolDefinition(
    name="lookup",
    description="Look one item up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
CALL = ToolCall(id="call_1", name="lookup", arguments='{"q": "x"}')
CONVERSATION = (
    Message.system("You route."),
    Message.user("Find x."),
    Message.assistant("", (CALL,)),
    Message.tool_result("call_1", '{"found": true}'),
)


def test_request_goes_to_chat_completions_with_a_bearer_key() -> None:
    request = openai.build_request(openai_profile(), CONVERSATION, [LOOKUP], SECRET)

    assert request.url == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["content-type"] == "application/json"
    assert SECRET not in repr(request)


def test_request_body_uses_native_tool_calling() -> None:
    request = openai.build_request(openai_profile(), CONVERSATION, [LOOKUP], SECRET)

    assert orjson.loads(request.content()) == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "You route."},
            {"role": "user", "content": "Find x."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"found": true}'},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look one item up.",
                    "parameters": LOOKUP.parameters,
                },
            }
        ],
        "temperature": 0.0,
        "max_tokens": 256,
    }


def test_optional_fields_are_left_out_when_unset() -> None:
    profile = openai_profile(api_key_env=None, temperature=None, max_tokens=None)

    request = openai.build_request(profile, [Message.user("hi")], [], None)

    assert "authorization" not in request.headers
    assert orjson.loads(request.content()) == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_parses_text_usage_and_finish_reason() -> None:
    body = openai_body({"role": "assistant", "content": "hello"})

    assert openai.parse_response(json.dumps(body).encode()) == ModelReply(
        text="hello", tool_calls=(), usage=Usage(11, 7), finish_reason="stop"
    )


def test_parses_tool_calls_keeping_the_raw_arguments() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "a", "arguments": '{"q":1}'}},
            {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{not json"}},
        ],
    }

    reply = openai.parse_response(json.dumps(openai_body(message)).encode())

    assert reply.text == ""
    assert reply.tool_calls == (ToolCall("c1", "a", '{"q":1}'), ToolCall("c2", "b", "{not json"))


def test_missing_usage_counts_as_zero() -> None:
    body = {"choices": [{"message": {"content": "x"}}]}

    reply = openai.parse_response(json.dumps(body).encode())

    assert reply.usage == Usage(0, 0)
    assert reply.finish_reason is None


def _with_call(call: dict[str, Any]) -> dict[str, Any]:
    return openai_body({"role": "assistant", "content": None, "tool_calls": [call]})


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>busy</html>", "body is not JSON"),
        (b"[]", "body is not an object"),
        (b"{}", "choices is not a list"),
        (b'{"choices": []}', "choices is empty"),
        (b'{"choices": ["x"]}', "choices[0] is not an object"),
        (b'{"choices": [{}]}', "choices[0].message is not an object"),
        (b'{"choices": [{"message": {"content": 3}}]}', "message.content is not a string"),
        (b'{"choices": [{"message": {"tool_calls": {}}}]}', "message.tool_calls is not a list"),
        (
            json.dumps(
                _with_call({"type": "function", "function": {"name": "a", "arguments": ""}})
            ),
            "tool_calls[0].id is missing",
        ),
        (
            json.dumps(_with_call({"id": "c1", "function": {"arguments": "{}"}})),
            "tool_calls[0].function.name is missing",
        ),
        (
            json.dumps(_with_call({"id": "c1", "function": {"name": "a", "arguments": {"q": 1}}})),
            "tool_calls[0].function.arguments is not a string",
        ),
        (json.dumps(_with_call({"id": "c1"})), "tool_calls[0].function is not an object"),
        (json.dumps(_with_call("c1")), "tool_calls[0] is not an object"),
        # Several problems: the first in the order checked (arguments before id and name).
        (
            json.dumps(_with_call({"function": {"arguments": 1}})),
            "tool_calls[0].function.arguments is not a string",
        ),
        (
            json.dumps(_with_call({"id": "", "function": {"name": "", "arguments": "{}"}})),
            "tool_calls[0].id is missing",
        ),
        (
            json.dumps(openai_body({"content": "x"}, usage={"prompt_tokens": -1})),
            "usage.prompt_tokens is not a non-negative integer",
        ),
        (
            json.dumps(openai_body({"content": "x"}, usage={"completion_tokens": "7"})),
            "usage.completion_tokens is not a non-negative integer",
        ),
    ],
)
def test_malformed_responses_say_why(body: bytes | str, reason: str) -> None:
    raw = body.encode() if isinstance(body, str) else body

    with pytest.raises(LLMMalformedResponse) as caught:
        openai.parse_response(raw)
    assert caught.value.reason.startswith(reason)
