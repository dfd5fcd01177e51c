from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.cli import main
from app.contract import load_contract
from tests.live_server import live_server

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_REGISTRY = REPO / "registries" / "example.yml"
TOOLLOOP = [sys.executable, "-m", "app.cli"]

BROKEN_REGISTRY = """\
subagents:
  owner-a:
    tools:
      first:
        callable: os:system
        description: not a public function of its own module
        input_schema: {type: object}
        output_schema: {}
        surprise: true
    runner_defaults:
      allowed_tools: [first, missing]
      max_calls: 0
      tool_timeout_s: 10
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "registry.yml"
    path.write_text(text)
    return path


def test_registry_check_prints_the_contract_hash(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry", "check", str(EXAMPLE_REGISTRY)]) == 0
    assert capsys.readouterr().out.strip() == load_contract([EXAMPLE_REGISTRY]).hash


def test_registry_check_prints_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, BROKEN_REGISTRY)
    assert main(["registry", "check", str(path)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) >= 3
    assert all(str(path) in line for line in lines)
    joined = "\n".join(lines)
    assert "surprise" in joined
    assert "missing" in joined
    assert "max_calls" in joined


def test_serve_refuses_a_broken_registry_before_touching_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, BROKEN_REGISTRY)
    database = tmp_path / "never.db"
    code = main(
        ["serve", "--registry", str(path), "--database-url", f"sqlite+aiosqlite:///{database}"]
    )
    assert code == 1
    assert "refusing to start" in capsys.readouterr().err
    assert not database.exists()


def test_db_upgrade_migrates_an_empty_sqlite_file(tmp_path: Path) -> None:
    database = tmp_path / "fresh.db"
    assert main(["db", "upgrade", "--database-url", f"sqlite+aiosqlite:///{database}"]) == 0
    assert database.exists()


def test_serve_exits_with_one_line_when_the_database_is_unreachable(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *TOOLLOOP,
            "serve",
            "--registry",
            str(EXAMPLE_REGISTRY),
            "--database-url",
            "postgresql+psycopg://toolloop@127.0.0.1:1/absent",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "127.0.0.1" in last
    assert "Traceback" not in result.stderr


def test_serve_answers_tools_over_real_http(tmp_path: Path) -> None:
    env = {"TOOLLOOP_REGISTRIES": str(EXAMPLE_REGISTRY)}
    with live_server(tmp_path, [], env=env) as base:
        body = httpx.get(f"{base}/tools", timeout=10).json()
    assert body["contract_hash"] == load_contract([EXAMPLE_REGISTRY]).hash
    assert (tmp_path / "toolloop.db").exists()


def test_serve_refuses_a_checkpoint_signing_key_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "key.pem").write_text("not a key")
    monkeypatch.setenv("TOOLLOOP_CHECKPOINT_SIGNING_KEY", str(tmp_path / "key.pem"))
    database = tmp_path / "never.db"
    code = main(
        [
            "serve",
            "--registry",
            str(EXAMPLE_REGISTRY),
            "--database-url",
            f"sqlite+aiosqlite:///{database}",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "refusing to start" in err[0]
    assert "not an unencrypted PEM private key" in err[0]
    assert not database.exists()


def test_serve_refuses_to_bind_beyond_loopback_without_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["serve", "--registry", str(EXAMPLE_REGISTRY), "--host", "0.0.0.0"])
    assert code == 1
    err = capsys.readouterr().err
    assert "0.0.0.0" in err
    assert "refusing to start" in err


def test_keys_create_prints_the_key_alone_and_stores_only_its_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys_file = tmp_path / "keys.yml"
    code = main(["keys", "create", "ops", "--scope", "runs:read:all", "--api-keys", str(keys_file)])
    assert code == 0
    captured = capsys.readouterr()
    key = captured.out.strip()
    assert captured.out == key + "\n"
    assert key
    stored = keys_file.read_text()
    assert key not in stored
    assert "ops" in stored
    assert "runs:read:all" in stored


def test_keys_create_without_a_keys_file_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "ops", "--scope", "admin"]) == 1
    assert "keys file" in capsys.readouterr().err
