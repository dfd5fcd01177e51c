from __future__ import annotations

import pytest

from app.llm.messages import Message, ToolCall


def test_constructors_build_each_role() -> None:
    call = ToolCall(id="c1", name="lookup", arguments='{"q": 1}')

    assert Message.system("s") == Message("system", "s")
    assert Message.user("u") == Message("user", "u")
    assert Message.assistant("", (call,)).tool_calls == (call,)
    assert Message.tool_result("c1", "ok") == Message("tool", "ok", tool_call_id="c1")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"role": "robot"}, "unknown message role"),
        (
            {"role": "user", "tool_calls": (ToolCall("c1", "t", "{}"),)},
            "only assistant messages carry tool calls",
        ),
        ({"role": "tool"}, "tool_call_id"),
        ({"role": "user", "tool_call_id": "c1"}, "tool_call_id"),
    ],
)
def test_inconsistent_messages_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Message(**kwargs)  # type: ignore[arg-type]
