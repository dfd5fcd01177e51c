"""Choosing the executor: the local one never loads Temporal's SDK; the Temporal one
refuses an SQLite database and is not ready while Temporal does not answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.api.app import create_app
from app.cli import main
from tests.live_server import REPO, free_port
from tests.support.app import AppFactory
from tests.temporal.registry import REGISTRY, write_registry

LOCAL_PLAN_RUN = """
import asyncio, sys
import httpx
from app.api.app import create_app
from app.settings import Settings

async def run() -> None:
    app = create_app(Settings(registries=[sys.argv[1]], database_url=sys.argv[2]))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            plan = {"owner": "tester", "calls": [
                {"call_key": "1", "tool": "echo", "args": {"text": "x"}}]}
            response = await client.post("/plans/sequential", json=plan)
            assert response.json()["status"] == "succeeded", response.text

asyncio.run(run())
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("temporalio", "app"))
print("temporalio" in sys.modules, any(name.startswith("app.temporal") for name in loaded))
"""


def test_the_local_executor_never_imports_temporal(tmp_path: Path) -> None:
    registry = write_registry(tmp_path)
    database = f"sqlite+aiosqlite:///{tmp_path / 'local.db'}"

    ran = subprocess.run(
        [sys.executable, "-c", LOCAL_PLAN_RUN, str(registry), database],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_the_temporal_executor_refuses_an_sqlite_database(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = write_registry(tmp_path)
    args = [
        command,
        "--registry",
        str(registry),
        "--database-url",
        f"sqlite+aiosqlite:///{tmp_path / 'x.db'}",
        "--temporal-address",
        "127.0.0.1:7233",
    ]
    if command == "serve":
        args += ["--executor", "temporal"]

    status = main(args)

    assert status == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "needs PostgreSQL" in err[0]
    assert "SQLite" in err[0]
    assert not (tmp_path / "x.db").exists()


def test_the_temporal_executor_needs_an_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["worker", "--registry", str(write_registry(tmp_path))])

    assert status == 1
    assert "TOOLLOOP_TEMPORAL_ADDRESS" in capsys.readouterr().err


@pytest.mark.postgres
async def test_readiness_is_503_while_temporal_does_not_answer(
    postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("temporalio")
    settings = AppFactory(postgres_url, tmp_path).settings(
        REGISTRY, executor="temporal", temporal_address=f"127.0.0.1:{free_port()}"
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["detail"] == "The executor is unavailable; retry later."
    assert "127.0.0.1" not in response.text


def test_a_worker_that_cannot_reach_temporal_exits_with_one_line(tmp_path: Path) -> None:
    pytest.importorskip("temporalio")
    address = f"127.0.0.1:{free_port()}"
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "worker",
            "--registry",
            str(write_registry(tmp_path)),
            "--database-url",
            "postgresql+psycopg://nobody@127.0.0.1:1/never",
            "--temporal-address",
            address,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TOOLLOOP_LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert ran.returncode == 1
    (line,) = ran.stderr.strip().splitlines()
    assert line.startswith(f"toolloop: Temporal at {address} cannot be reached")
    assert "Traceback" not in ran.stderr
