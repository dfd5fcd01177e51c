"""The database is unavailable when the service starts.

Without a wait the service exits 1 with one line (tests/test_cli.py). With
`--wait-for-database SECONDS` it serves at once: `/healthz` 200, `/readyz` and
plans 503 problems with `Retry-After`, never 500, until the database appears;
then it migrates and becomes ready by itself. Past SECONDS it exits 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import POSTGRES_ENV, POSTGRES_SKIP_REASON
from tests.faults.registry import sequential, step
from tests.live_server import ServerProcess, free_port
from tests.support.waiting import wait_for_sync

REPO = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"


@dataclass
class AbsentDatabase:
    url: str
    create: Callable[[], None]


def _absent_sqlite(tmp_path: Path) -> Iterator[AbsentDatabase]:
    directory = tmp_path / "not-yet"
    yield AbsentDatabase(
        f"sqlite+aiosqlite:///{directory / 'toolloop.db'}", lambda: directory.mkdir()
    )


def _absent_postgres() -> Iterator[AbsentDatabase]:
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(POSTGRES_SKIP_REASON)
    import psycopg

    url = make_url(base)
    name = f"toolloop_t_{uuid.uuid4().hex[:12]}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)

    def create() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    try:
        yield AbsentDatabase(url.set(database=name).render_as_string(hide_password=False), create)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def absent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AbsentDatabase]:
    if request.param == "sqlite":
        yield from _absent_sqlite(tmp_path)
    else:
        yield from _absent_postgres()


def _serve_env(registry: Path, database_url: str) -> dict[str, str]:
    return {
        "TOOLLOOP_REGISTRIES": str(registry),
        "TOOLLOOP_DATABASE_URL": database_url,
        "PYTHONPATH": str(REPO),
    }


def test_told_to_wait_the_service_becomes_ready_when_the_database_appears(
    tmp_path: Path, registry: Path, absent: AbsentDatabase
) -> None:
    server = ServerProcess(
        tmp_path, ["--wait-for-database", "120"], _serve_env(registry, absent.url)
    )
    try:
        server.wait_until_answering()
        with httpx.Client(base_url=server.base, timeout=10) as client:
            assert client.get("/healthz").status_code == 200
            waiting = [
                client.get("/readyz"),
                client.post("/plans/sequential", json=sequential(step("a"))),
                client.get("/runs"),
            ]
            for response in waiting:
                assert response.status_code == 503, response.text
                assert response.headers["content-type"] == PROBLEM
                assert response.headers["retry-after"]
                assert "waiting for its database" in response.json()["detail"]

            absent.create()
            created_at = time.perf_counter()
            wait_for_sync(lambda: client.get("/readyz").status_code == 200, "ready")
            ready_after_s = time.perf_counter() - created_at
            assert client.get("/readyz").status_code == 200
            done = client.post("/plans/sequential", json=sequential(step("a")))
            assert done.status_code == 200
            assert done.json()["status"] == "succeeded"
    finally:
        server.stop()
    print(f"\nready {ready_after_s:.2f} s after the database appeared")


def test_told_to_wait_it_gives_up_with_one_line_and_exit_1(tmp_path: Path, registry: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            "--port",
            str(free_port()),
            "--wait-for-database",
            "1",
        ],
        env={
            **os.environ,
            **_serve_env(registry, "postgresql+psycopg://toolloop@127.0.0.1:1/absent"),
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("toolloop: database unavailable at 127.0.0.1:1/absent")
    assert "waited 1 s" in last
    assert "Traceback" not in result.stderr
