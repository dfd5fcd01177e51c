"""A `Conversation`'s request body, spliced from fragments kept between requests, is
byte for byte the straightforward encoding (the whole body built and encoded at once)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from app.llm import anthropic, openai
from app.llm.errors import LLMRequestError
from app.llm.messages import Conversation, Message, ToolCall, ToolDefinition, WireCache
from app.llm.profiles import ModelProfile
from app.llm.wire import ProviderRequest
from tests.llm.fakes import SECRET, anthropic_profile, openai_profile

Build = Callable[
    [ModelProfile, Sequence[Message], Sequence[ToolDefinition], str | None], ProviderRequest
]
PROVIDERS: list[tuple[str, Build, ModelProfile]] = [
    ("openai", openai.build_request, openai_profile()),
    ("openai-bare", openai.build_request, openai_profile(temperature=None, max_tokens=None)),
    ("anthropic", anthropic.build_request, anthropic_profile()),
    ("anthropic-tuned", anthropic.build_request, anthropic_profile(temperature=0.3)),
]
TOOLS = (
    ToolDefinition("lookup", "Look one item up.", {"type": "object", "properties": {}}),
    ToolDefinition(
        "write", 'Wrïte "it" down.\n', MappingProxyType({"type": "object", "required": []})
    ),
)


def _turn(index: int) -> list[Message]:
    """The messages one router turn adds, varied so every encoding path is used."""
    calls = (
        ToolCall(f"call-{index}", "lookup", orjson.dumps({"q": f"näive {index} \u2028"}).decode()),
        ToolCall(f"call-{index}b", "write", '{"text": "\\"quoted\\"", "n": 1.5}'),
    )
    kind = index % 5
    if kind == 0:
        return [
            Message.assistant("", calls[:1]),
            Message.tool_result(f"call-{index}", '{"status":"succeeded","output":{}}'),
        ]
    if kind == 1:
        return [
            Message.assistant("Let me look.", calls),
            Message.tool_result(f"call-{index}", "denied: no"),
            Message.tool_result(f"call-{index}b", "rejected: duplicate_call: ..."),
            Message.user("Your answer was not accepted: try again (attempt 1 of 3)."),
        ]
    if kind == 2:
        return [Message.assistant("thinking aloud, no calls"), Message.assistant("")]
    if kind == 3:
        return [Message.system("A note mid-conversation."), Message.user("Go on \x00 \U0001f600")]
    return [Message.user("first"), Message.user("second"), Message.system("")]


def _plain(build: Build, profile: ModelProfile, conversation: Conversation, tools: Any) -> bytes:
    return build(profile, list(conversation), tools, SECRET).content()


def _spliced(build: Build, profile: ModelProfile, conversation: Conversation, tools: Any) -> bytes:
    return build(profile, conversation, tools, SECRET).content()


@pytest.mark.parametrize(("name", "build", "profile"), PROVIDERS, ids=[p[0] for p in PROVIDERS])
def test_a_growing_history_is_encoded_as_a_whole_would_be(
    name: str, build: Build, profile: ModelProfile
) -> None:
    cache, history = WireCache(), [Message.user("The task: do things.")]
    for index in range(25):
        lead = (Message.system(f"You route. Turns left: {25 - index}."),)
        tools = TOOLS if index % 7 else TOOLS[:1]
        conversation = Conversation(lead, history, cache)
        spliced = _spliced(build, profile, conversation, tools)

        assert spliced == _plain(build, profile, conversation, tools)
        assert orjson.loads(spliced)  # one JSON document
        history.extend(_turn(index))


@pytest.mark.parametrize(("name", "build", "profile"), PROVIDERS, ids=[p[0] for p in PROVIDERS])
def test_a_history_changed_other_than_by_appending_is_encoded_again(
    name: str, build: Build, profile: ModelProfile
) -> None:
    cache = WireCache()
    history = [Message.user("task"), *_turn(0), *_turn(1), *_turn(3)]
    lead = (Message.system("You route."),)

    def check(messages: list[Message], tools: Any = TOOLS) -> None:
        conversation = Conversation(lead, messages, cache)
        assert _spliced(build, profile, conversation, tools) == _plain(
            build, profile, conversation, tools
        )

    check(history)
    history[2] = Message.user("replaced in place")
    check(history)
    del history[3:]
    check(history)
    check([Message.user("another conversation"), *_turn(4)])
    check([])
    check(history, list(TOOLS))  # a list of tools: encoded, not kept
    check(history + _turn(1), ())


@pytest.mark.parametrize(("name", "build", "profile"), PROVIDERS, ids=[p[0] for p in PROVIDERS])
def test_any_lead_is_encoded_as_a_whole_would_be(
    name: str, build: Build, profile: ModelProfile
) -> None:
    cache, history = WireCache(), [*_turn(0), *_turn(3)]
    for lead in [
        (),
        (Message.system("one"), Message.system("two")),
        (Message.system(""),),
        (Message.system("s"), Message.user("a user message before the history")),
        (Message.user("only a user message"),),
    ]:
        conversation = Conversation(lead, history, cache)
        assert _spliced(build, profile, conversation, TOOLS) == _plain(
            build, profile, conversation, TOOLS
        )


def test_arguments_anthropic_cannot_take_fail_on_every_request() -> None:
    cache = WireCache()
    bad = Message.assistant("", (ToolCall("c1", "lookup", "[1, 2]"),))
    history = [Message.user("task"), bad]
    conversation = Conversation((Message.system("s"),), history, cache)
    profile = anthropic_profile()

    for _ in range(2):
        with pytest.raises(LLMRequestError, match="not a JSON object"):
            anthropic.build_request(profile, conversation, TOOLS, SECRET)
    with pytest.raises(LLMRequestError, match="not a JSON object"):
        anthropic.build_request(profile, list(conversation), TOOLS, SECRET)

    del history[1]
    assert _spliced(anthropic.build_request, profile, conversation, TOOLS) == _plain(
        anthropic.build_request, profile, conversation, TOOLS
    )


def test_a_conversation_is_the_lead_then_the_history() -> None:
    lead = (Message.system("s"),)
    history = [Message.user("u"), Message.assistant("a")]
    conversation = Conversation(lead, history, WireCache())

    assert len(conversation) == 3
    assert list(conversation) == [*lead, *history]
    assert conversation[0] is lead[0]
    assert conversation[-1] is history[-1]
    assert conversation[1:] == history
    history.append(Message.user("later"))
    assert len(conversation) == 4


@pytest.mark.parametrize(
    ("build", "profile", "module", "encoder"),
    [
        (openai.build_request, openai_profile(), openai, "_message"),
        (anthropic.build_request, anthropic_profile(), anthropic, "_blocks"),
    ],
    ids=["openai", "anthropic"],
)
def test_each_history_message_is_encoded_once(
    build: Build, profile: ModelProfile, module: Any, encoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[Message] = []
    original = getattr(module, encoder)

    def counting(message: Message) -> Any:
        encoded.append(message)
        return original(message)

    monkeypatch.setattr(module, encoder, counting)
    cache, history = WireCache(), [Message.user("task")]
    for index in range(10):
        conversation = Conversation((Message.system(f"turn {index}"),), history, cache)
        build(profile, conversation, TOOLS, SECRET)
        sent = list(history)
        history.extend(_turn(index % 2))

    from_history = [m for m in encoded if any(m is h for h in sent)]
    assert sorted(map(id, from_history)) == sorted(map(id, sent))  # each once, none twice


@pytest.mark.parametrize(("name", "build", "profile"), PROVIDERS, ids=[p[0] for p in PROVIDERS])
def test_the_members_around_the_messages_follow_the_profile_and_tools(
    name: str, build: Build, profile: ModelProfile
) -> None:
    cache, history = WireCache(), [Message.user("task"), *_turn(0)]
    lead = (Message.system("You route."),)
    tuned = replace(profile)
    others = [
        profile,
        tuned,  # equal, another object
        openai_profile(model="other-model", temperature=1, max_tokens=None)
        if name.startswith("openai")
        else anthropic_profile(model="other-model", temperature=0.5, max_tokens=7),
        profile,
    ]
    for index, current in enumerate(others):
        for tools in (TOOLS, TOOLS, TOOLS[:1], (), TOOLS):
            conversation = Conversation(lead, history, cache)
            assert _spliced(build, current, conversation, tools) == _plain(
                build, current, conversation, tools
            ), (index, tools)
        history.extend(_turn(index + 1))
