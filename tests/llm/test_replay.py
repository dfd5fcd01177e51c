"""The replay provider: recorded replies checked, served in order, failures replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.llm.errors import LLMMalformedResponse
from app.llm.messages import Message, ToolCall, Usage
from app.llm.profiles import ModelProfile, ProfilesError, parse_profiles
from app.llm.replay import EntryError, ReplayedFailure, ReplayExhausted, ReplayModel, parse_entry

PROFILE = ModelProfile(name="replayed", provider="replay", base_url="", model="replay")
REPLY = {
    "role": "router",
    "kind": "reply",
    "text": "",
    "tool_calls": [{"id": "c1", "name": "lookup", "arguments": '{"term":"x"}'}],
    "usage": {"input_tokens": 7, "output_tokens": 3},
    "finish_reason": "tool_calls",
    "truncated": False,
}


async def test_replies_are_served_in_order_then_the_recording_runs_out() -> None:
    final = {"role": "final", "kind": "reply", "text": "done"}
    model = ReplayModel([parse_entry(REPLY), parse_entry(final)])
    ask = [Message.user("anything")]

    first = await model.complete(PROFILE, ask)
    second = await model.complete(PROFILE, ask)

    assert first.tool_calls == (ToolCall("c1", "lookup", '{"term":"x"}'),)
    assert (first.usage, first.finish_reason) == (Usage(7, 3), "tool_calls")
    assert (second.text, second.tool_calls, second.usage) == ("done", (), Usage(0, 0))
    with pytest.raises(ReplayExhausted, match="no reply 3: it holds 2"):
        await model.complete(PROFILE, ask)
    assert (model.asked, model.served) == (3, 2)


async def test_recorded_failures_are_raised_again() -> None:
    model = ReplayModel(
        [
            parse_entry({"role": "router", "kind": "malformed", "reason": "no choices"}),
            parse_entry({"role": "router", "kind": "error", "error": "the request failed"}),
            parse_entry({"role": "final", "kind": "timeout"}),
        ]
    )
    with pytest.raises(LLMMalformedResponse, match="no choices"):
        await model.complete(PROFILE, [])
    with pytest.raises(ReplayedFailure, match="the request failed"):
        await model.complete(PROFILE, [])
    with pytest.raises(TimeoutError):
        await model.complete(PROFILE, [])


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "/: a recorded reply must be a JSON object"),
        ({"role": "router", "kind": "dream"}, "/kind: must be one of reply, malformed"),
        ({**REPLY, "role": "critic"}, "/role: must be 'router' or 'final'"),
        ({**REPLY, "extra": 1}, "/extra: unknown key"),
        ({"role": "router", "kind": "reply"}, "/text: required key is missing"),
        ({**REPLY, "usage": {"input_tokens": -1}}, "/usage/input_tokens"),
        ({**REPLY, "tool_calls": [{"id": "c1", "name": "x", "arguments": {}}]}, "/arguments"),
    ],
)
def test_a_malformed_recorded_reply_names_its_problem(data: object, problem: str) -> None:
    with pytest.raises(EntryError) as caught:
        parse_entry(data)
    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_a_replay_profile_names_a_cassette_beside_the_file_or_a_run() -> None:
    profiles = parse_profiles(
        {
            "profiles": {
                "from-file": {"provider": "replay", "cassette": "tour.cassette.jsonl"},
                "from-run": {"provider": "replay", "run_id": "01abc"},
            }
        },
        "/etc/toolloop/profiles.yml",
    )
    assert list(profiles) == ["from-file", "from-run"]
    assert profiles["from-file"].cassette == Path("/etc/toolloop/tour.cassette.jsonl")
    assert profiles["from-file"].replays
    assert (profiles["from-run"].replay_run, profiles["from-run"].cassette) == ("01abc", None)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"provider": "replay"}, "profiles.r: a replay profile names exactly one of cassette"),
        (
            {"provider": "replay", "cassette": "a", "run_id": "b"},
            "profiles.r: a replay profile names exactly one of cassette",
        ),
        ({"provider": "replay", "cassette": "a", "model": "m"}, "profiles.r.model: unknown key"),
        ({"provider": "replay", "cassette": ""}, "profiles.r.cassette"),
    ],
)
def test_an_invalid_replay_profile_is_a_load_error(spec: object, message: str) -> None:
    with pytest.raises(ProfilesError) as caught:
        parse_profiles({"profiles": {"r": spec}}, "p.yml")
    assert any(message in str(problem) for problem in caught.value.problems), caught.value


def test_replay_profiles_keep_their_place_among_the_others() -> None:
    profiles = parse_profiles(
        {
            "profiles": {
                "a": {"provider": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"},
                "r": {"provider": "replay", "run_id": "x"},
                "b": {"provider": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"},
            }
        },
        "p.yml",
    )
    assert list(profiles) == ["a", "r", "b"]
