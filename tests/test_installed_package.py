"""The package as a user installs it: a wheel in a fresh virtualenv, run from a directory
outside the checkout, migrates its database, serves the example registry and runs a plan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import httpx
import pytest

from tests.live_server import REPO, ServerProcess

PLAN = {
    "owner": "text-worker",
    "calls": [
        {"call_key": "n", "tool": "normalize_text", "args": {"text": "  Hello   World "}},
        {"call_key": "c", "tool": "word_count", "args": {"text": "Hello World"}},
    ],
}


def clean_environment() -> dict[str, str]:
    """This process's environment without anything that would point Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLLOOP_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    return env


def make_virtualenv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin"


def build_wheel(source: Path, into: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--wheel-dir",
            str(into),
            ".",
        ],
        cwd=source,
        check=True,
        env=clean_environment(),
    )
    (wheel,) = into.glob("toolloop-*.whl")
    return wheel


def run_plan(base: str) -> dict[str, object]:
    response = httpx.post(f"{base}/plans/sequential", json=PLAN, timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a fresh virtualenv holding the wheel built from this checkout."""
    root = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(REPO, root / "dist")
    bin_dir = make_virtualenv(root / "venv")
    subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", str(wheel)],
        check=True,
        env=clean_environment(),
    )
    return bin_dir


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory outside the checkout, holding a copy of the example registry."""
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    shutil.copy(REPO / "registries" / "example.yml", workdir / "registry.yml")
    return workdir


def test_the_wheel_carries_its_migrations_and_prompts(installed: Path, elsewhere: Path) -> None:
    found = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import app, app.store.migrate as m, app.settings as s; "
            "print(app.__file__); print(m.head_revision()); print(s.Settings().prompts_dir)",
        ],
        cwd=elsewhere,
        env=clean_environment(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    package, head, prompts = found
    assert Path(package).is_relative_to(installed.parent)
    assert not Path(package).is_relative_to(REPO)
    assert head
    assert Path(prompts).is_relative_to(installed.parent)
    assert (Path(prompts) / "router.system.md").is_file()


def test_installed_wheel_migrates_serves_and_runs_a_plan(
    installed: Path, elsewhere: Path, database_url: str
) -> None:
    env = {**clean_environment(), "TOOLLOOP_DATABASE_URL": database_url}
    upgraded = subprocess.run(
        [str(installed / "toolloop"), "db", "upgrade"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert upgraded.returncode == 0, upgraded.stderr
    assert "latest migration" in upgraded.stderr

    server = ServerProcess(
        elsewhere,
        ["--registry", "registry.yml"],
        env=env,
        program=(str(installed / "toolloop"),),
    )
    try:
        server.wait_until_answering()
        assert httpx.get(f"{server.base}/readyz", timeout=10).status_code == 200
        body = run_plan(server.base)
        assert body["status"] == "succeeded"
        assert [r["status"] for r in body["receipts"]] == ["succeeded", "succeeded"]  # type: ignore[attr-defined]
        stored = httpx.get(f"{server.base}/runs/{body['plan_id']}/receipts", timeout=10)
        assert [r["call_key"] for r in stored.json()["items"]] == ["n", "c"]
    finally:
        server.stop()


def test_installed_wheel_replays_the_tour_cassette_with_no_model(
    installed: Path, elsewhere: Path, database_url: str
) -> None:
    shutil.copy(REPO / "registries" / "tour.cassette.jsonl", elsewhere / "tour.cassette.jsonl")
    env = {**clean_environment(), "TOOLLOOP_DATABASE_URL": database_url}
    replayed = subprocess.run(
        [
            str(installed / "toolloop"),
            "router",
            "replay",
            "tour.cassette.jsonl",
            "--registry",
            "registry.yml",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert replayed.returncode == 0, replayed.stderr
    answer = json.loads(replayed.stdout)
    assert answer["status"] == "done"
    assert answer["replay"]["matches"] is True


def test_installed_wheel_exports_a_bundle_that_verifies_with_no_database(
    installed: Path, elsewhere: Path, database_url: str
) -> None:
    env = {**clean_environment(), "TOOLLOOP_DATABASE_URL": database_url}
    server = ServerProcess(
        elsewhere,
        ["--registry", "registry.yml"],
        env=env,
        program=(str(installed / "toolloop"),),
    )
    try:
        server.wait_until_answering()
        run_id = str(run_plan(server.base)["plan_id"])
    finally:
        server.stop()
    exported = subprocess.run(
        [str(installed / "toolloop"), "audit", "export", run_id, "--out", "run.jsonl"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert exported.returncode == 0, exported.stderr
    offline = elsewhere / "offline"
    offline.mkdir()
    shutil.move(elsewhere / "run.jsonl", offline / "run.jsonl")

    verified = subprocess.run(
        [str(installed / "toolloop"), "audit", "verify", "run.jsonl"],
        cwd=offline,
        env=clean_environment(),
        capture_output=True,
        text=True,
    )

    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("intact: 1 chain(s)")
    assert [path.name for path in offline.iterdir()] == ["run.jsonl"]
