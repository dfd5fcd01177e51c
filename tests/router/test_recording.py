"""Model replies as a run keeps them: redacted with the run's rules, capped, marked."""

from __future__ import annotations

from app.foundation.redaction import Redactor
from app.llm.messages import ModelReply, ToolCall, Usage
from app.router.recording import MAX_REPLY_CHARS, failure_entry, reply_entry

SECRET = "sk-" + "A" * 32


def test_a_reply_is_kept_redacted_with_the_tools_rules() -> None:
    reply = ModelReply(
        f"my key is {SECRET}",
        (ToolCall("c1", "echo", '{"text": "hi", "secret": "hunter2"}'),),
        Usage(5, 2),
        "tool_calls",
    )
    entry = reply_entry("router", reply, {"echo": Redactor(("secret",))})

    assert SECRET not in entry["text"]
    assert "hunter2" not in entry["tool_calls"][0]["arguments"]
    assert '"text":"hi"' in entry["tool_calls"][0]["arguments"]
    assert entry["usage"] == {"input_tokens": 5, "output_tokens": 2}
    assert (entry["role"], entry["kind"], entry["truncated"]) == ("router", "reply", False)


def test_a_long_reply_is_capped_with_a_marker() -> None:
    reply = ModelReply("x" * (MAX_REPLY_CHARS + 10))
    entry = reply_entry("final", reply, {})

    assert entry["truncated"] is True
    assert entry["text"].startswith("x" * MAX_REPLY_CHARS)
    assert entry["text"].endswith("...[truncated: 10 more characters]")


def test_failures_keep_their_redacted_reason() -> None:
    assert failure_entry("router", "timeout") == {"role": "router", "kind": "timeout"}
    malformed = failure_entry("final", "malformed", f"body {SECRET}")
    assert malformed["kind"] == "malformed"
    assert SECRET not in malformed["reason"]
    assert failure_entry("router", "error", "down")["error"] == "down"
