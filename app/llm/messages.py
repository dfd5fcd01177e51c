"""Provider-neutral conversation types shared by the router and the adapters.

Everything a model sends back is untrusted: `ToolCall.arguments` is the raw JSON
text the model produced, passed on unparsed so the router can validate it and
count malformed calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Literal, overload

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown message role {self.role!r}")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool calls")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise ValueError("tool messages, and only they, carry a tool_call_id")

    # The factories make messages valid by construction; they skip the generated
    # `__init__` and its checks (a few are made per router turn).

    @classmethod
    def system(cls, content: str) -> Message:
        return _made(cls, "system", content, (), None)

    @classmethod
    def user(cls, content: str) -> Message:
        return _made(cls, "user", content, (), None)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return _made(cls, "assistant", content, tool_calls, None)

    @classmethod
    def tool_result(cls, tool_call_id: str, content: str) -> Message:
        if tool_call_id is None:
            raise ValueError("tool messages, and only they, carry a tool_call_id")
        return _made(cls, "tool", content, (), tool_call_id)


_new = object.__new__
_set = object.__setattr__


def _made(
    cls: type[Message],
    role: Role,
    content: str,
    tool_calls: tuple[ToolCall, ...],
    tool_call_id: str | None,
) -> Message:
    message = _new(cls)
    _set(message, "role", role)
    _set(message, "content", content)
    _set(message, "tool_calls", tool_calls)
    _set(message, "tool_call_id", tool_call_id)
    return message


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ModelReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None


class WireCache:
    """Per-provider encodings of one conversation's history, kept between requests.

    Owned by whoever keeps the conversation (one per run); each provider adapter
    keeps its own entry under its name. Only `app.llm` reads or writes the entries.
    """

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[str, object] = {}


class Conversation(Sequence[Message]):
    """The messages of one request: `lead` (rendered for this request, such as the
    system prompt) followed by `history`, shared with earlier requests.

    The history is append-only between requests; messages are immutable. The
    adapters encode each history message once (per provider) into `cache` and
    splice a request body from the kept fragments; a history that changed
    otherwise is noticed (compared by identity, then by value) and encoded again.
    As a plain sequence it is the lead then the history.
    """

    __slots__ = ("cache", "history", "lead")

    def __init__(
        self, lead: Sequence[Message], history: Sequence[Message], cache: WireCache
    ) -> None:
        self.lead = tuple(lead)
        self.history = history
        self.cache = cache

    def __len__(self) -> int:
        return len(self.lead) + len(self.history)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return [*self.lead, *self.history][index]

    def __iter__(self) -> Iterator[Message]:
        return chain(self.lead, self.history)
