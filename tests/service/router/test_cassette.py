"""Cassette files: written from a recording, read back, and every problem of an
untrusted one named with its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.service.router.cassette import (
    MAX_CASSETTE_BYTES,
    CassetteError,
    cassette_text,
    parse_cassette,
    read_cassette,
)
from tests.router.replay_support import TOUR_CASSETTE


def tour_lines() -> list[dict[str, object]]:
    return [json.loads(line) for line in TOUR_CASSETTE.read_text().splitlines()]


def encoded(lines: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def problems_of(data: bytes) -> list[str]:
    with pytest.raises(CassetteError) as caught:
        parse_cassette(data, "bad.jsonl")
    assert str(caught.value).startswith("cassette bad.jsonl: ")
    return caught.value.problems


def test_the_shipped_cassette_reads_and_writes_back_the_same() -> None:
    recording = read_cassette(TOUR_CASSETTE)
    assert recording.source == "cassette tour.cassette.jsonl"
    assert [e.role for e in recording.entries] == ["router", "router", "final"]
    assert recording.recorded.outcome["status"] == "done"
    again = parse_cassette(cassette_text(recording).encode(), "again.jsonl")
    assert again.request == recording.request
    assert again.recorded == recording.recorded
    assert again.replies == recording.replies


def test_each_problem_is_named_with_its_line() -> None:
    header, *replies = tour_lines()
    header = {**header, "toolloop_cassette": 2, "surprise": True}
    replies[1] = {**replies[1], "kind": "dream"}
    found = problems_of(encoded([header, *replies]))
    assert "line 1: /toolloop_cassette: must be 1" in found
    assert "line 1: /surprise: unknown key" in found
    assert any(p.startswith("line 3: /kind: must be one of reply") for p in found)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "is empty: expected a header line, then one line per reply"),
        (b"\xff\xfe", "byte 0: not UTF-8"),
        (b'{"toolloop_cassette": 1,\n', "line 1: not one JSON value"),
        (b"[]\n", "line 1: /: must be a JSON object"),
        (b'{"toolloop_cassette": 1}\n[]\n', "line 2: /: a recorded reply must be a JSON object"),
    ],
)
def test_a_cassette_that_is_not_one_names_why(data: bytes, problem: str) -> None:
    found = problems_of(data)
    assert any(p.startswith(problem) for p in found), found


def test_a_cassette_over_the_size_cap_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * (MAX_CASSETTE_BYTES + 1))
    with pytest.raises(CassetteError, match="is larger than"):
        read_cassette(big)


def test_a_missing_cassette_says_so(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"gone\.jsonl: cannot be read"):
        read_cassette(tmp_path / "gone.jsonl")
