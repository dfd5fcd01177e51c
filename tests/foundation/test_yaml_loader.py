from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.foundation.yaml_loader import YAMLLoadError, load_yaml_file, parse_yaml
from tests.contract.helpers import base_registry, only_problem, write


def test_plain_scalars_follow_the_json_compatible_core_schema() -> None:
    data = parse_yaml(
        "a: [1, -2, 2.5, 1e3, .5, 010, 0x1F, 0o17, true, False, null, ~, '']\n"
        "b: [yes, no, on, off, 2024-01-01, 12:30]\n"
    )
    assert data == {
        "a": [1, -2, 2.5, 1000.0, 0.5, 10, 31, 15, True, False, None, None, ""],
        "b": ["yes", "no", "on", "off", "2024-01-01", "12:30"],
    }


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yml", "subagents:\n  worker-a: {tools: [\n")
    problem = only_problem([path])
    assert problem.file == str(path)
    assert problem.message.startswith("line 3, column 1:")


def test_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.yml", "subagents: {}\nguardrails: {}\nsubagents: {}\n")
    problem = only_problem([path])
    assert problem.message == "line 3, column 1: duplicate key 'subagents'"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &anchor {x: 1}\n", "anchors (&name) are not allowed"),
        ("a: {x: 1}\nb: *anchor\n", "aliases (*name) are not allowed"),
        ("a: &x 1\nb: *x\n", "anchors (&name) are not allowed"),
    ],
)
def test_anchors_and_aliases_are_refused(text: str, message: str) -> None:
    with pytest.raises(YAMLLoadError, match=re.escape(message)):
        parse_yaml(text)


def test_alias_bomb_is_refused_before_expansion() -> None:
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    with pytest.raises(YAMLLoadError, match="line 1, column 4: anchors"):
        parse_yaml(bomb)


@pytest.mark.parametrize(
    "value",
    [
        "!!python/object:app.contract.compiled.RetryPolicy {max_attempts: 1}",
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/name:os.system",
        "!!binary aGVsbG8=",
        "!!timestamp 2024-01-01",
        "!!set {a: null}",
        "!local x",
    ],
)
def test_non_json_tags_are_refused_and_never_constructed(tmp_path: Path, value: str) -> None:
    marker = tmp_path / "marker"
    with pytest.raises(YAMLLoadError, match="is not allowed"):
        parse_yaml("a: " + value.replace("{marker}", str(marker)) + "\n")
    assert not marker.exists()


def test_standard_json_tags_are_accepted() -> None:
    assert parse_yaml("a: !!str 12\nb: !!int '7'\nc: !!float '1.5'\n") == {
        "a": "12",
        "b": 7,
        "c": 1.5,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: .inf\n", "JSON has no infinity or NaN"),
        ("a: .nan\n", "JSON has no infinity or NaN"),
        ("1: x\n", "mapping key 1 is not a string"),
        ("null: x\n", "mapping key None is not a string"),
        ("? [a]\n: 1\n", "mapping key a collection is not a string"),
        ("a: !!bool yes\n", "'yes' is not a boolean"),
        ("a: !!int 1.5\n", "'1.5' is not an integer"),
        ("---\na: 1\n---\nb: 2\n", "expected a single document"),
        ("a: " + "[" * 80 + "]" * 80 + "\n", "nesting deeper than 64 levels"),
    ],
)
def test_values_json_cannot_hold_are_refused(text: str, message: str) -> None:
    with pytest.raises(YAMLLoadError, match=re.escape(message)):
        parse_yaml(text)


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "big.yml", base_registry())
    size = path.stat().st_size
    assert "larger than the" in only_problem([path], max_file_bytes=size - 1).message
    with pytest.raises(YAMLLoadError, match=f"larger than the {size - 1}-byte limit"):
        load_yaml_file(path, max_bytes=size - 1)
    assert load_yaml_file(path, max_bytes=size) is not None


def test_missing_file_and_directory_are_problems(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    assert only_problem([missing]).message == "file not found"
    assert only_problem([tmp_path]).message.startswith("cannot read the file")


def test_non_utf8_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes("description: caf\xe9\n".encode("latin-1"))
    assert only_problem([path]).message == "not UTF-8 (byte 16)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file declares nothing"),
        ("{}\n", "the file declares nothing"),
        ("- a\n- b\n", "the top level must be a mapping"),
    ],
)
def test_empty_or_non_mapping_file_is_a_problem(tmp_path: Path, text: str, message: str) -> None:
    assert only_problem([write(tmp_path, "r.yml", text)]).message == message
