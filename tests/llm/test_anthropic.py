from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from app.llm import anthropic
from app.llm.errors import LLMMalformedResponse, LLMRequestError
from app.llm.messages import Message, ModelReply, ToolCall, ToolDefinition, Usage
from tests.llm.fakes import SECRET, anthropic_profile

LOOKUP = ToolDefinition(
    name="lookup",
    description="Look one item up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)


def body_of(messages: list[Message], tools: list[ToolDefinition] | None = None) -> Any:
    request = anthropic.build_request(anthropic_profile(), messages, tools or [], SECRET)
    return orjson.loads(request.content())


def test_request_goes_to_messages_with_version_and_key_headers() -> None:
    request = anthropic.build_request(anthropic_profile(), [Message.user("hi")], [], SECRET)

    assert request.url == "https://anthropic.test/v1/messages"
    assert request.headers["x-api-key"] == SECRET
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert SECRET not in repr(request)


def test_request_body_puts_system_on_top_and_tool_results_in_user_turns() -> None:
    messages = [
        Message.system("You route."),
        Message.user("Find x and y."),
        Message.assistant(
            "Looking.",
            (ToolCall("tu_1", "lookup", '{"q": "x"}'), ToolCall("tu_2", "lookup", '{"q":"y"}')),
        ),
        Message.tool_result("tu_1", "found x"),
        Message.tool_result("tu_2", "found y"),
        Message.user("Now answer."),
    ]

    assert body_of(messages, [LOOKUP]) == {
        "model": "claude-test",
        "max_tokens": anthropic.DEFAULT_MAX_TOKENS,
        "system": "You route.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Find x and y."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x"}},
                    {"type": "tool_use", "id": "tu_2", "name": "lookup", "input": {"q": "y"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu_1", "content": "found x"},
                    {"type": "tool_result", "tool_use_id": "tu_2", "content": "found y"},
                    {"type": "text", "text": "Now answer."},
                ],
            },
        ],
        "tools": [
            {
                "name": "lookup",
                "description": "Look one item up.",
                "input_schema": LOOKUP.parameters,
            }
        ],
    }


def test_profile_settings_and_several_system_messages() -> None:
    profile = anthropic_profile(temperature=0.2, max_tokens=99, api_key_env=None)
    messages = [Message.system("one"), Message.system("two"), Message.user("hi")]

    request = anthropic.build_request(profile, messages, [], None)

    body = orjson.loads(request.content())
    assert "x-api-key" not in request.headers
    assert body["system"] == "one\n\ntwo"
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 99
    assert "tools" not in body


@pytest.mark.parametrize("arguments", ["{broken", "[1, 2]", '"text"'])
def test_replaying_a_call_whose_arguments_are_not_an_object_is_refused(arguments: str) -> None:
    messages = [Message.user("x"), Message.assistant("", (ToolCall("c1", "t", arguments),))]

    with pytest.raises(LLMRequestError, match=r"'c1'.*not a JSON object"):
        body_of(messages)


def test_parses_text_tool_use_and_usage() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "Let me look. "},
            {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x", "n": [1]}},
            {"type": "text", "text": "Done."},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 20, "output_tokens": 9},
    }

    reply = anthropic.parse_response(json.dumps(body).encode())

    assert reply == ModelReply(
        text="Let me look. Done.",
        tool_calls=(ToolCall("tu_1", "lookup", '{"q":"x","n":[1]}'),),
        usage=Usage(20, 9),
        finish_reason="tool_use",
    )
    assert json.loads(reply.tool_calls[0].arguments) == {"q": "x", "n": [1]}


def test_an_empty_content_list_is_an_empty_reply() -> None:
    reply = anthropic.parse_response(b'{"content": [], "stop_reason": "end_turn"}')

    assert reply == ModelReply(text="", usage=Usage(0, 0), finish_reason="end_turn")


def _content(*blocks: Any) -> str:
    return json.dumps({"content": list(blocks), "stop_reason": "end_turn"})


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "body is not JSON"),
        ("[1]", "body is not an object"),
        ('{"type": "error", "error": {}}', "content is not a list"),
        (_content("text"), "content[0] is not an object"),
        (_content({"text": "x"}), "content[0].type is not a string"),
        (_content({"type": "text", "text": None}), "content[0].text is not a string"),
        (_content({"type": "tool_use", "name": "t", "input": {}}), "content[0].id is missing"),
        (_content({"type": "tool_use", "id": "t1", "input": {}}), "content[0].name is missing"),
        (
            _content({"type": "tool_use", "id": "t1", "name": "t", "input": "{}"}),
            "content[0].input is not an object",
        ),
        (_content({"type": "tool_use", "id": "t1", "name": "t"}), "content[0].input is not"),
        ('{"content": [], "stop_reason": 1}', "stop_reason is not a string"),
        ('{"content": [], "usage": []}', "usage is not an object"),
        ('{"content": [], "usage": {"input_tokens": true}}', "usage.input_tokens is not"),
    ],
)
def test_malformed_responses_say_why(body: str, reason: str) -> None:
    with pytest.raises(LLMMalformedResponse) as caught:
        anthropic.parse_response(body.encode())
    assert caught.value.reason.startswith(reason)
