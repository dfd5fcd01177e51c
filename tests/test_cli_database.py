"""CLI commands against a database that cannot serve them: an empty (never
migrated) one, or one a release this code does not know migrated. Each is one
line on stderr and a non-zero exit, never a traceback or SQL, on both databases."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from app.cli import main
from app.store.database import create_database_engine

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_REGISTRY = str(REPO / "registries" / "example.yml")
UNKNOWN_REVISION = "ffffffffffff"


BACKTEST = [
    "policy",
    "backtest",
    "--registry",
    EXAMPLE_REGISTRY,
    "--guardrail",
    "no_huge_texts",
    "--since",
    "2026-01-01T00:00:00Z",
]


def backtest(database_url: str) -> int:
    return main([*BACKTEST, "--database-url", database_url])


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("toolloop: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert "SELECT" not in err.upper()
    return lines[0]


def migrated_by_an_unknown_release(database_url: str) -> None:
    async def stamp() -> None:
        engine = create_database_engine(database_url)
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
                )
                await connection.execute(
                    text("INSERT INTO alembic_version VALUES (:revision)"),
                    {"revision": UNKNOWN_REVISION},
                )
        finally:
            await engine.dispose()

    asyncio.run(stamp())


def test_a_backtest_of_an_unmigrated_database_says_to_upgrade_it(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    assert backtest(database_url) == 1
    out, err = capsys.readouterr()
    assert out == ""
    line = one_line(err)
    assert "has no ToolLoop tables" in line
    assert line.endswith("run `toolloop db upgrade` first")

    assert main(["db", "upgrade", "--database-url", database_url]) == 0
    assert backtest(database_url) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("no_huge_texts: 0 call(s)")


def test_a_database_at_an_unknown_migration_is_one_line_for_every_command(
    capsys: pytest.CaptureFixture[str], database_url: str, tmp_path: Path
) -> None:
    migrated_by_an_unknown_release(database_url)
    commands = [
        ["db", "upgrade"],
        ["router", "replay", "some-run", "--registry", EXAMPLE_REGISTRY],
        ["router", "replay", "some-run", "--save-cassette", str(tmp_path / "x.jsonl")],
        BACKTEST,
    ]
    for command in commands:
        assert main([*command, "--database-url", database_url]) == 1, command
        _, err = capsys.readouterr()
        line = one_line(err)
        assert f"is at migration {UNKNOWN_REVISION!r}, which this toolloop does not know" in line
