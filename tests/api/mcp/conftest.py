"""`toolloop serve` processes on 127.0.0.1 serving the MCP test registry, one per module.

`open_server` runs without keys, once on SQLite and once on PostgreSQL;
`keyed_server` runs with a keys file on SQLite, with the keys `KEYS` names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from app.api.auth.keys_file import create_key
from tests.api.mcp.registry import OWNER, write_registry
from tests.conftest import _scratch_postgres_database
from tests.live_server import REPO, ServerProcess

# name -> scopes: an agent that may run tools, one that may only read, another agent.
KEYS = {
    "agent": ["plans:execute", "runs:read"],
    "reader": ["runs:read"],
    "other-agent": ["plans:execute", "runs:read"],
}


@dataclass(frozen=True)
class Served:
    base: str
    keys: dict[str, str] = field(default_factory=dict)

    def url(self, owner: str = OWNER) -> str:
        return f"{self.base}/mcp/{owner}"

    def headers(self, key_name: str | None) -> dict[str, str]:
        return {} if key_name is None else {"Authorization": f"Bearer {self.keys[key_name]}"}

    def get(self, path: str, key_name: str | None = None) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", headers=self.headers(key_name), timeout=30)

    def post(self, path: str, key_name: str | None = None) -> httpx.Response:
        return httpx.post(f"{self.base}{path}", headers=self.headers(key_name), timeout=30)


def _serve(directory: Path, database_url: str, env: dict[str, str]) -> Iterator[str]:
    registry = write_registry(directory)
    server = ServerProcess(
        directory,
        ["--registry", str(registry), "--database-url", database_url],
        {"PYTHONPATH": str(REPO), **env},
    )
    try:
        server.wait_until_answering()
        yield server.base
    finally:
        server.stop()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def open_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("mcp-open")
    if request.param == "sqlite":
        databases: Iterator[str] = iter([f"sqlite+aiosqlite:///{directory / 'toolloop.db'}"])
    else:
        databases = _scratch_postgres_database()
    for database_url in databases:
        for base in _serve(directory, database_url, {}):
            yield Served(base)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("mcp-keys")
    keys_file = directory / "keys.yml"
    keys = {name: create_key(keys_file, name, scopes) for name, scopes in KEYS.items()}
    database_url = f"sqlite+aiosqlite:///{directory / 'toolloop.db'}"
    for base in _serve(directory, database_url, {"TOOLLOOP_API_KEYS": str(keys_file)}):
        yield Served(base, keys)
