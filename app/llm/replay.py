"""The `replay` provider: a model that answers with the replies a run recorded.

A recorded reply is one JSON object (a line of a cassette, an item of a stored
recording), untrusted when it comes from a file:

    {"role": "router|final", "kind": "reply", "text": "...",
     "tool_calls": [{"id": "...", "name": "...", "arguments": "<JSON text>"}],
     "usage": {"input_tokens": 0, "output_tokens": 0},
     "finish_reason": "stop" | null, "truncated": false}
    {"role": "...", "kind": "malformed", "reason": "..."}   the reply did not parse
    {"role": "...", "kind": "error", "error": "..."}        the request failed
    {"role": "...", "kind": "timeout"}                      no answer within the run's time

`ReplayModel` serves them in order through the same `complete` as the HTTP
client, whatever it is asked: the router loop cannot tell it from a model.
Asked for more replies than it holds, it raises `ReplayExhausted`, which the
router treats as any model failure (the run ends `llm_error`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.llm.errors import LLMError, LLMMalformedResponse
from app.llm.messages import Message, ModelReply, ToolCall, ToolDefinition, Usage
from app.llm.profiles import ModelProfile

ROLES = ("router", "final")


class ReplayExhausted(LLMError):
    def __init__(self, asked: int, held: int) -> None:
        self.asked = asked
        self.held = held
        super().__init__(f"the recording has no reply {asked}: it holds {held}")


class ReplayedFailure(LLMError):
    """A model failure the recording kept (its summary, as the run stated it)."""


_Count = Annotated[int, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Call(_Strict):
    id: str
    name: str
    arguments: str


class _Usage(_Strict):
    input_tokens: _Count = 0
    output_tokens: _Count = 0


class _Reply(_Strict):
    role: Literal["router", "final"]
    kind: Literal["reply"]
    text: str
    tool_calls: list[_Call] = []
    usage: _Usage = _Usage()
    finish_reason: str | None = None
    truncated: bool = False


class _Malformed(_Strict):
    role: Literal["router", "final"]
    kind: Literal["malformed"]
    reason: str


class _Failed(_Strict):
    role: Literal["router", "final"]
    kind: Literal["error"]
    error: str


class _Timeout(_Strict):
    role: Literal["router", "final"]
    kind: Literal["timeout"]


_KINDS: Mapping[str, type[_Strict]] = {
    "reply": _Reply,
    "malformed": _Malformed,
    "error": _Failed,
    "timeout": _Timeout,
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded reply (`document` as stored), checked."""

    role: str
    kind: str
    document: Mapping[str, Any]


class EntryError(ValueError):
    """The problems of one recorded reply, each `pointer: message`."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def parse_entry(data: Any) -> Entry:
    """A recorded reply checked against its kind's shape; EntryError lists every problem."""
    if not isinstance(data, dict):
        raise EntryError(["/: a recorded reply must be a JSON object"])
    kind = data.get("kind")
    model = _KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise EntryError([f"/kind: must be one of {', '.join(_KINDS)}, not {_shown(kind)}"])
    try:
        checked = model.model_validate(data)
    except ValidationError as exc:
        raise EntryError(
            [
                f"/{'/'.join(str(p) for p in e['loc'])}: {_message(e['type'], e['msg'])}"
                for e in exc.errors()
            ]
        ) from None
    return Entry(str(data["role"]), str(kind), checked.model_dump())


def _message(kind: str, message: str) -> str:
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind in ("model_type", "dict_type"):
        return "must be a JSON object"
    return message.replace("Input should", "must")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def reply_of(entry: Entry, profile: ModelProfile) -> ModelReply:
    """The reply an entry holds, or the failure it recorded, raised."""
    document = entry.document
    if entry.kind == "malformed":
        raise LLMMalformedResponse(str(document["reason"]), profile=profile.name)
    if entry.kind == "error":
        raise ReplayedFailure(str(document["error"]))
    if entry.kind == "timeout":
        raise TimeoutError("the recorded request had no answer within the run's time")
    usage = document["usage"]
    return ModelReply(
        text=document["text"],
        tool_calls=tuple(
            ToolCall(call["id"], call["name"], call["arguments"]) for call in document["tool_calls"]
        ),
        usage=Usage(usage["input_tokens"], usage["output_tokens"]),
        finish_reason=document["finish_reason"],
    )


class ReplayModel:
    """A `ChatModel` serving `entries` in order, one per request."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = tuple(entries)
        self.asked = 0

    @property
    def served(self) -> int:
        return min(self.asked, len(self.entries))

    async def complete(
        self,
        profile: ModelProfile,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
    ) -> ModelReply:
        index = self.asked
        self.asked += 1
        if index >= len(self.entries):
            raise ReplayExhausted(index + 1, len(self.entries))
        return reply_of(self.entries[index], profile)
