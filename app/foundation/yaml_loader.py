"""Explicit, safe YAML loading for registry files.

Registries are data, so the loader accepts only what JSON can express:
mappings with string keys, sequences, strings, integers, finite floats,
booleans and null. It refuses anchors and aliases (no alias bombs, no shared
structure), duplicate keys, explicit tags outside that set (`!!python/object`,
`!!binary`, `!!timestamp`, local tags ...), and nesting beyond a depth limit.
Plain scalars resolve as in YAML 1.2's core schema: `yes`/`no`/`on`/`off` and
dates stay strings, and `010` is ten.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

DEFAULT_MAX_FILE_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 64
# A registry of a hundred tools is a few thousand nodes; a megabyte of `[a,a,a,...]`
# is half a million, and costs seconds to validate before it could be refused.
DEFAULT_MAX_NODES = 100_000

_TAG = "tag:yaml.org,2002:"
_ALLOWED_TAGS = frozenset(
    _TAG + name for name in ("str", "int", "float", "bool", "null", "seq", "map")
)

_DECIMAL = re.compile(r"[-+]?[0-9]+")
_HEX_OR_OCTAL = re.compile(r"0x[0-9a-fA-F]+|0o[0-7]+")
_FLOAT = re.compile(
    r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
)
_NOT_FINITE = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})


class YAMLLoadError(Exception):
    """A registry file that cannot be read or is not acceptable YAML; the message names the line."""


class _Refused(yaml.MarkedYAMLError):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class _RegistryLoader(yaml.SafeLoader):
    yaml_implicit_resolvers: dict[Any, Any] = {}  # filled below; none inherited

    def __init__(self, stream: str, max_depth: int, max_nodes: int) -> None:
        super().__init__(stream)
        self._max_depth = max_depth
        self._depth = 0
        self._max_nodes = max_nodes
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise _Refused("aliases (*name) are not allowed", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise _Refused("anchors (&name) are not allowed", event.start_mark)
        tag = getattr(event, "tag", None)
        if tag not in (None, "!") and tag not in _ALLOWED_TAGS:
            raise _Refused(
                f"tag {tag!r} is not allowed; registries hold plain JSON-compatible values",
                event.start_mark,
            )
        self._nodes += 1
        if self._nodes > self._max_nodes:
            raise _Refused(f"more than {self._max_nodes} YAML nodes", event.start_mark)
        self._depth += 1
        if self._depth > self._max_depth:
            raise _Refused(f"nesting deeper than {self._max_depth} levels", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                shown = repr(key) if isinstance(key_node, ScalarNode) else "a collection"
                raise _Refused(
                    f"mapping key {shown} is not a string (quote it)", key_node.start_mark
                )
            if key in mapping:
                raise _Refused(f"duplicate key {key!r}", key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _construct_int(loader: _RegistryLoader, node: ScalarNode) -> int:
    text = loader.construct_scalar(node)
    try:
        if _DECIMAL.fullmatch(text):
            return int(text)
        if _HEX_OR_OCTAL.fullmatch(text):
            return int(text, 0)
    except ValueError as exc:
        raise _Refused(f"integer out of range: {exc}", node.start_mark) from None
    raise _Refused(f"{text!r} is not an integer", node.start_mark)


def _construct_float(loader: _RegistryLoader, node: ScalarNode) -> float:
    text = loader.construct_scalar(node)
    if _NOT_FINITE.fullmatch(text):
        raise _Refused(f"{text!r}: JSON has no infinity or NaN", node.start_mark)
    if not _FLOAT.fullmatch(text) and not _DECIMAL.fullmatch(text):
        raise _Refused(f"{text!r} is not a number", node.start_mark)
    return float(text)


def _construct_bool(loader: _RegistryLoader, node: ScalarNode) -> bool:
    text = loader.construct_scalar(node)
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise _Refused(f"{text!r} is not a boolean", node.start_mark)


_IMPLICIT = (
    ("bool", r"true|True|TRUE|false|False|FALSE"),
    ("null", r"~|null|Null|NULL|"),
    ("int", f"{_DECIMAL.pattern}|{_HEX_OR_OCTAL.pattern}"),
    ("float", f"{_FLOAT.pattern}|{_NOT_FINITE.pattern}"),
)
for _name, _pattern in _IMPLICIT:
    _RegistryLoader.add_implicit_resolver(_TAG + _name, re.compile(f"^(?:{_pattern})$"), None)
_RegistryLoader.add_constructor(_TAG + "int", _construct_int)
_RegistryLoader.add_constructor(_TAG + "float", _construct_float)
_RegistryLoader.add_constructor(_TAG + "bool", _construct_bool)


def parse_yaml(
    text: str, max_depth: int = DEFAULT_MAX_DEPTH, max_nodes: int = DEFAULT_MAX_NODES
) -> Any:
    loader = _RegistryLoader(text, max_depth, max_nodes)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        raise YAMLLoadError(_describe(exc)) from None
    except yaml.YAMLError as exc:
        raise YAMLLoadError(str(exc)) from None
    finally:
        loader.dispose()


def load_yaml_file(
    path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> Any:
    try:
        with path.open("rb") as stream:
            data = stream.read(max_bytes + 1)
    except FileNotFoundError:
        raise YAMLLoadError("file not found") from None
    except OSError as exc:
        raise YAMLLoadError(f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise YAMLLoadError(f"file is larger than the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YAMLLoadError(f"not UTF-8 (byte {exc.start})") from None
    return parse_yaml(text, max_depth)


def _describe(exc: yaml.MarkedYAMLError) -> str:
    message = exc.problem or exc.context or "invalid YAML"
    if exc.problem and exc.context:
        context_line = f", line {exc.context_mark.line + 1}" if exc.context_mark else ""
        message = f"{exc.problem} ({exc.context}{context_line})"
    mark = exc.problem_mark or exc.context_mark
    return f"line {mark.line + 1}, column {mark.column + 1}: {message}" if mark else message
