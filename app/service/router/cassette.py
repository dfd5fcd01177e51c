"""Cassettes: a recorded router run as a file, to replay without its database.

A cassette is JSON lines (UTF-8), at most MAX_CASSETTE_BYTES. The first line
says what was recorded; each further line is one model reply, in the order the
run asked for them (shapes in `app.llm.replay`):

    {"toolloop_cassette": 1, "run_id": "...", "contract_hash": "sha256:...",
     "request": {<the run's request, redacted: owner, goal, context, profiles,
                  final_schema, budgets, steps, allowed_tools, guardrails,
                  completion>},
     "recorded": {"calls": [{"call_key", "tool", "decision", "why", "status"}],
                  "checks": ["final:ok", "completion:failed", ...],
                  "roles": ["router", "final", ...],
                  "outcome": {"status", "stopped_by", "turns", "attempts"}}}
    {"role": "router", "kind": "reply", "text": "", "tool_calls": [...], ...}
    {"role": "final", "kind": "reply", "text": "...", ...}

A cassette is untrusted input: every problem is reported with its line and a
JSON pointer, and nothing is replayed from a cassette that has one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.llm.replay import Entry, EntryError, parse_entry
from app.service.router.trail import Trail

MAX_CASSETTE_BYTES = 8 * 1024 * 1024
MAX_CASSETTE_LINES = 10_000
MAX_PROBLEMS = 20
VERSION = 1


@dataclass(frozen=True, slots=True)
class Recording:
    """A recorded run: what it was asked, what it decided, its model's replies."""

    source: str
    run_id: str
    contract_hash: str | None
    request: Mapping[str, Any]
    recorded: Trail
    replies: Sequence[Mapping[str, Any]]
    entries: Sequence[Entry]


class CassetteError(ValueError):
    """Every problem of a cassette, each `line N: /pointer: message`."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name = name
        self.problems = problems[:MAX_PROBLEMS]
        more = len(problems) - len(self.problems)
        listed = "; ".join(self.problems) + (f"; and {more} more" if more > 0 else "")
        super().__init__(f"cassette {name}: {listed}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


_Positive = Annotated[int, Field(gt=0)]


class _Budgets(_Strict):
    max_calls: _Positive | None
    max_turns: _Positive | None
    deadline_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None
    max_tokens: _Positive | None
    # A cassette may leave it out: the run had no cost budget.
    max_cost_nanos: Annotated[int, Field(ge=0)] | None = None


class _Step(_Strict):
    call_key: str
    tool: str
    args: dict[str, Any]


class _Completion(_Strict):
    verify: str
    max_attempts: _Positive
    params: dict[str, Any]


class _Request(_Strict):
    owner: str
    goal: str
    router_profile: str
    final_profile: str
    context: dict[str, Any]
    final_schema: dict[str, Any] | None
    budgets: _Budgets
    steps: list[_Step]
    allowed_tools: list[str] | None
    guardrails: list[str]
    completion: _Completion | None


class _Call(_Strict):
    call_key: str
    tool: str | None
    decision: Literal["admitted", "rejected", "denied", "confirmation"]
    why: str | None
    status: str | None


class _Outcome(_Strict):
    status: str | None
    stopped_by: str | None
    turns: int | None
    attempts: int | None


class _Recorded(_Strict):
    calls: list[_Call]
    checks: list[str]
    roles: list[Literal["router", "final"]]
    outcome: _Outcome


class _Header(_Strict):
    toolloop_cassette: Literal[1]
    run_id: str
    contract_hash: str | None = None
    request: _Request
    recorded: _Recorded


def read_cassette(path: Path) -> Recording:
    """The recording a cassette file holds; CassetteError names every problem."""
    name = path.name
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CASSETTE_BYTES + 1)
    except OSError as exc:
        raise CassetteError(
            name, [f"cannot be read: {exc.strerror or type(exc).__name__}"]
        ) from None
    if len(data) > MAX_CASSETTE_BYTES:
        raise CassetteError(name, [f"is larger than {MAX_CASSETTE_BYTES} bytes"])
    return parse_cassette(data, name)


def parse_cassette(data: bytes, name: str) -> Recording:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteError(name, [f"byte {exc.start}: not UTF-8"]) from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise CassetteError(name, ["is empty: expected a header line, then one line per reply"])
    if len(lines) > MAX_CASSETTE_LINES:
        raise CassetteError(name, [f"has more than {MAX_CASSETTE_LINES} lines"])
    problems: list[str] = []
    parsed: list[tuple[int, Any]] = []
    for number, line in lines:
        try:
            parsed.append((number, json.loads(line)))
        except ValueError as exc:
            problems.append(f"line {number}: not one JSON value ({exc.args[0].split(':')[0]})")
    if problems:
        raise CassetteError(name, problems)
    (first, header_data), replies = parsed[0], parsed[1:]
    header: _Header | None = None
    try:
        header = _Header.model_validate(header_data)
    except ValidationError as exc:
        problems.extend(
            f"line {first}: /{'/'.join(str(p) for p in e['loc'])}: {_message(e['type'], e['msg'])}"
            for e in exc.errors()
        )
    entries: list[Entry] = []
    for number, reply in replies:
        try:
            entries.append(parse_entry(reply))
        except EntryError as exc:
            problems.extend(f"line {number}: {problem}" for problem in exc.problems)
    if problems or header is None:
        raise CassetteError(name, problems)
    dumped = header.model_dump()
    return Recording(
        source=f"cassette {name}",
        run_id=header.run_id,
        contract_hash=header.contract_hash,
        request=dumped["request"],
        recorded=Trail.from_json(dumped["recorded"]),
        replies=[dict(entry.document) for entry in entries],
        entries=entries,
    )


def cassette_text(recording: Recording) -> str:
    header = {
        "toolloop_cassette": VERSION,
        "run_id": recording.run_id,
        "contract_hash": recording.contract_hash,
        "request": dict(recording.request),
        "recorded": recording.recorded.to_json(),
    }
    lines = [header, *recording.replies]
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def _message(kind: str, message: str) -> str:
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind in ("model_type", "dict_type"):
        return "must be a JSON object"
    return message.replace("Input should", "must")
