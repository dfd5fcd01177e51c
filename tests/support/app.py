"""The service in-process on a real database, reached through httpx.ASGITransport.

`running(settings)` starts one app (its lifespan) and a client on it; `AppFactory`
(the `make_app` fixture) writes a registry into the test's directory and builds the
settings or the running app from it. Most test files only override the `settings`
fixture; the `app` and `client` fixtures (`tests/support/fixtures.py`) follow it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings
from app.store.models import AuditEvent, Receipt, Run
from app.store.repositories.audit import AuditRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository

Served = tuple[FastAPI, httpx.AsyncClient]
Registry = str | Mapping[str, Any] | Path  # YAML text, a document, or a file


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Served]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield app, client


def write_registry(directory: Path, registry: Registry, name: str = "registry.yml") -> Path:
    """The registry's file: written into `directory` unless it is one already."""
    if isinstance(registry, Path):
        return registry
    path = directory / name
    path.write_text(registry if isinstance(registry, str) else yaml.safe_dump(dict(registry)))
    return path


@dataclass(frozen=True)
class AppFactory:
    database_url: str
    directory: Path

    def registry(self, registry: Registry, name: str = "registry.yml") -> Path:
        return write_registry(self.directory, registry, name)

    def settings(self, registry: Registry, **overrides: Any) -> Settings:
        values: dict[str, Any] = {"database_url": self.database_url} | overrides
        return Settings(registries=[self.registry(registry)], **values)

    def __call__(self, registry: Registry, **overrides: Any) -> AbstractAsyncContextManager[Served]:
        return running(self.settings(registry, **overrides))


async def settled(app: FastAPI, run_id: str) -> None:
    """Wait until the run's task under the supervisor, if it has one, ended."""
    handle = app.state.runtime.runs.get(run_id)
    if handle is not None:
        await handle.wait()


async def stored_run(app: FastAPI, run_id: str) -> Run:
    async with app.state.runtime.sessions() as session:
        run = await RunRepository(session).get(run_id)
    assert run is not None
    return run


async def stored_receipts(app: FastAPI, run_id: str) -> list[Receipt]:
    async with app.state.runtime.sessions() as session:
        return await ReceiptRepository(session).list_for_run(run_id)


async def stored_audit(app: FastAPI, run_id: str) -> list[AuditEvent]:
    await app.state.runtime.writer.flush()
    async with app.state.runtime.sessions() as session:
        return await AuditRepository(session).list_for_run(run_id)
