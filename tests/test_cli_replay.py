"""`toolloop router replay`: a cassette or a recorded run replayed from the command
line on both databases, its cassette saved, and every failure a message, not a
traceback."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.replay_command import DIFFERS, FAILED, REPLAYED
from app.service.router.cassette import read_cassette
from tests.router.replay_support import EXAMPLE, NARROWER_SCHEMA, TOUR_CASSETTE, changed_example


def replay(
    capsys: pytest.CaptureFixture[str], source: str | Path, database_url: str, *extra: str
) -> tuple[int, str, str]:
    status = main(["router", "replay", str(source), "--database-url", database_url, *extra])
    out, err = capsys.readouterr()
    return status, out, err


def answer(out: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(out)
    return body


def test_a_cassette_replays_and_the_replay_saves_a_cassette_that_replays_too(
    capsys: pytest.CaptureFixture[str], database_url: str, tmp_path: Path
) -> None:
    status, out, _ = replay(capsys, TOUR_CASSETTE, database_url, "--registry", str(EXAMPLE))

    assert status == REPLAYED
    first = answer(out)
    assert (first["status"], first["turns"], first["attempts"]) == ("done", 2, 1)
    assert first["replay"]["matches"] is True
    assert first["replay"]["source"] == "cassette tour.cassette.jsonl"
    assert "receipts" not in first

    saved = tmp_path / "saved.jsonl"
    status, out, err = replay(capsys, first["run_id"], database_url, "--save-cassette", str(saved))
    assert (status, out) == (REPLAYED, "")
    assert f"wrote {saved}" in err
    recording = read_cassette(saved)
    assert recording.run_id == first["run_id"]
    assert [entry.role for entry in recording.entries] == ["router", "router", "final"]
    assert recording.recorded.outcome == {
        "status": "done",
        "stopped_by": "",
        "turns": 2,
        "attempts": 1,
    }

    status, out, _ = replay(capsys, saved, database_url, "--registry", str(EXAMPLE))
    assert status == REPLAYED
    assert answer(out)["replay"]["differences"] == []

    status, out, _ = replay(capsys, first["run_id"], database_url, "--registry", str(EXAMPLE))
    assert status == REPLAYED
    assert answer(out)["replay"]["source"] == f"run {first['run_id']}"


def test_a_changed_schema_exits_4_naming_the_difference(
    capsys: pytest.CaptureFixture[str], database_url: str, tmp_path: Path
) -> None:
    narrower = changed_example(tmp_path, NARROWER_SCHEMA)
    status, out, _ = replay(capsys, TOUR_CASSETTE, database_url, "--registry", str(narrower))

    assert status == DIFFERS
    kinds = [(d["kind"], d["call_key"]) for d in answer(out)["replay"]["differences"]]
    assert ("call_refused", "t1c0") in kinds


def test_a_malformed_cassette_or_an_unknown_run_is_one_line_on_stderr(
    capsys: pytest.CaptureFixture[str], database_url: str, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"toolloop_cassette": 1}\n')
    status, out, err = replay(capsys, broken, database_url, "--registry", str(EXAMPLE))
    assert (status, out) == (FAILED, "")
    assert "toolloop: cassette broken.jsonl: line 1: /run_id: required key is missing" in err
    assert "Traceback" not in err

    status, out, err = replay(capsys, "no-such-run", database_url, "--registry", str(EXAMPLE))
    assert (status, out) == (FAILED, "")
    assert "toolloop: no router run 'no-such-run'" in err

    status, _, err = replay(
        capsys, "no-such-run", database_url, "--save-cassette", str(tmp_path / "x.jsonl")
    )
    assert status == FAILED
    assert "toolloop: no router run 'no-such-run'" in err


def test_a_replay_without_profiles_says_only_profiles_are_missing(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    sqlite_url: str,
) -> None:
    monkeypatch.delenv("TOOLLOOP_PROFILES", raising=False)
    with caplog.at_level(logging.INFO, logger="toolloop.router"):
        status, _, _ = replay(capsys, TOUR_CASSETTE, sqlite_url, "--registry", str(EXAMPLE))

    assert status == REPLAYED
    (line,) = [r.getMessage() for r in caplog.records if r.name == "toolloop.router"]
    assert "router disabled" not in line
    assert line.startswith("router runs need model profiles")
    assert "`toolloop router replay` are not affected" in line
    assert line.endswith("no model profiles file is configured (TOOLLOOP_PROFILES)")
