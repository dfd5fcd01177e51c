"""The formal prompt files: loaded and checked at startup, rendered per turn.

A prompt file is `<name>.md` in the prompts directory: YAML front matter
between `---` lines, then the body. The front matter declares the prompt's
name (it must match the file), a version, and the placeholders the body uses:

    ---
    prompt: router.task
    version: 1
    placeholders: [goal, context, observations]
    ---
    Goal: {{goal}}
    ...

`{{name}}` is the only syntax. Every placeholder the body uses must be
declared and every declared one used; each prompt has placeholders it must
use (a router prompt without the goal is refused) and a set it may use.
Values are substituted in one pass, so text inside a value is never expanded.
Python keeps no copy of any prompt text: a missing or invalid file makes the
router unavailable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from app.foundation.canonical import sha256_digest
from app.foundation.yaml_loader import YAMLLoadError, parse_yaml

MAX_PROMPT_BYTES = 64 * 1024
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_FRONT_MATTER_KEYS = frozenset({"prompt", "version", "placeholders", "description"})


@dataclass(frozen=True, slots=True)
class PromptSpec:
    required: frozenset[str]
    allowed: frozenset[str]


def _spec(required: set[str], optional: set[str] | None = None) -> PromptSpec:
    return PromptSpec(frozenset(required), frozenset(required | (optional or set())))


# What the router supplies to each prompt; the wording lives in the files.
PROMPTS: Mapping[str, PromptSpec] = {
    "router.system": _spec({"budgets"}, {"owner", "tools"}),
    "router.task": _spec({"goal"}, {"context", "observations"}),
    "router.completion_retry": _spec({"reason"}, {"attempt", "max_attempts"}),
    "final.system": _spec(set(), {"goal", "context"}),
    "final.task": _spec({"goal", "observations"}, {"context"}),
    "final.schema": _spec({"final_schema"}),
    "final.retry": _spec({"problems"}, {"attempt", "max_attempts"}),
}


class PromptError(Exception):
    """Every problem found in the prompts directory, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    version: int
    placeholders: frozenset[str]
    body: str
    digest: str
    # The body split at its placeholders: text, name, text, ..., text (parsed once).
    parts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    # Whether the body uses every declared placeholder (a loaded prompt does): then
    # filling the parts finds any missing value, without checking the keys first.
    uses_all: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = tuple(_PLACEHOLDER.split(self.body))
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "uses_all", self.placeholders <= set(parts[1::2]))

    def render(self, values: Mapping[str, str]) -> str:
        if not self.uses_all and not values.keys() >= self.placeholders:
            self._missing(values)
        # One pass: the text of a value is never searched for placeholders.
        pieces = list(self.parts)
        try:
            for index in range(1, len(pieces), 2):
                pieces[index] = values[pieces[index]]
        except KeyError:
            self._missing(values)
        return "".join(pieces)

    def _missing(self, values: Mapping[str, str]) -> NoReturn:
        missing = (self.placeholders | set(self.parts[1::2])) - values.keys()
        raise KeyError(f"prompt {self.name!r} needs values for {sorted(missing)}") from None


class PromptSet:
    """The loaded prompts by name; read-only."""

    __slots__ = ("_prompts", "source")

    def __init__(self, prompts: Mapping[str, Prompt], source: str = "") -> None:
        self._prompts = dict(prompts)
        self.source = source

    def render(self, name: str, **values: str) -> str:
        return self._prompts[name].render(values)

    def versions(self) -> dict[str, str]:
        """`name -> "v<version> <digest>"`, recorded with every run."""
        return {
            name: f"v{prompt.version} {prompt.digest}"
            for name, prompt in sorted(self._prompts.items())
        }


def load_prompts(directory: Path) -> PromptSet:
    """Load every prompt the router needs; PromptError lists every problem."""
    if not directory.is_dir():
        raise PromptError([f"{directory}: the prompts directory does not exist"])
    problems: list[str] = []
    prompts: dict[str, Prompt] = {}
    for name, spec in PROMPTS.items():
        path = directory / f"{name}.md"
        found: list[str] = []
        prompt = _load(path, name, spec, found)
        problems.extend(f"{path}: {problem}" for problem in found)
        if prompt is not None and not found:
            prompts[name] = prompt
    if problems:
        raise PromptError(problems)
    return PromptSet(prompts, source=str(directory))


def _load(path: Path, name: str, spec: PromptSpec, problems: list[str]) -> Prompt | None:
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_PROMPT_BYTES + 1)
    except FileNotFoundError:
        problems.append("missing: the router needs this prompt")
        return None
    except OSError as exc:
        problems.append(f"cannot read the file: {exc.strerror or exc}")
        return None
    if len(raw) > MAX_PROMPT_BYTES:
        problems.append(f"larger than the {MAX_PROMPT_BYTES}-byte limit")
        return None
    try:
        text = raw.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        problems.append(f"not UTF-8 (byte {exc.start})")
        return None
    parts = _split_front_matter(text)
    if parts is None:
        problems.append("must start with YAML front matter between '---' lines")
        return None
    front_text, body = parts
    try:
        front = parse_yaml(front_text)
    except YAMLLoadError as exc:
        problems.append(f"front matter: {exc}")
        return None
    declared = _check_front_matter(front, name, problems)
    used = _check_body(body, problems)
    if declared is None:
        return None
    for missing in sorted(spec.required - declared):
        problems.append(f"placeholders: must include {missing!r}")
    for unknown in sorted(declared - spec.allowed):
        problems.append(
            f"placeholders: {unknown!r} is not supplied to this prompt "
            f"(available: {', '.join(sorted(spec.allowed)) or 'none'})"
        )
    for undeclared in sorted(used - declared):
        problems.append(f"body uses {{{{{undeclared}}}}}, which is not declared in placeholders")
    for unused in sorted(declared - used):
        problems.append(f"placeholders: {unused!r} is declared but the body never uses it")
    if problems:
        return None
    return Prompt(
        name=name,
        version=front["version"],
        placeholders=declared,
        body=body,
        digest=sha256_digest(raw),
    )


def _split_front_matter(text: str) -> tuple[str, str] | None:
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end == -1:
        return None
    return text[4 : end + 1], text[end + 5 :]


def _check_front_matter(front: Any, name: str, problems: list[str]) -> frozenset[str] | None:
    if not isinstance(front, dict):
        problems.append("front matter must be a mapping")
        return None
    for key in sorted(front.keys() - _FRONT_MATTER_KEYS):
        problems.append(f"front matter: unknown key {key!r}")
    if front.get("prompt") != name:
        problems.append(f"front matter: prompt must be {name!r} (the file name)")
    version = front.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.append("front matter: version must be a positive integer")
    description = front.get("description")
    if description is not None and not isinstance(description, str):
        problems.append("front matter: description must be a string")
    placeholders = front.get("placeholders")
    if not isinstance(placeholders, list) or not all(isinstance(p, str) for p in placeholders):
        problems.append("front matter: placeholders must be a list of names")
        return None
    if len(set(placeholders)) != len(placeholders):
        problems.append("front matter: placeholders lists a name twice")
    return frozenset(placeholders)


def _check_body(body: str, problems: list[str]) -> frozenset[str]:
    if not body.strip():
        problems.append("the body is empty")
    stripped = _PLACEHOLDER.sub("", body)
    if "{{" in stripped or "}}" in stripped:
        problems.append("the body has '{{' or '}}' that is not a {{name}} placeholder")
    return frozenset(_PLACEHOLDER.findall(body))
