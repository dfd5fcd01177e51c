"""Helpers for the router's HTTP tests (tests/api/router/)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings
from app.store.models import AuditEvent, Receipt, Run
from app.store.repositories.audit import AuditRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.router.registry import write_registry
from tests.support.fake_llm import profiles_yaml


def router_settings(database_url: str, tmp_path: Path, base_url: str, **overrides: Any) -> Settings:
    profiles = tmp_path / "profiles.yml"
    profiles.write_text(profiles_yaml(base_url))
    values: dict[str, Any] = {
        "registries": [write_registry(tmp_path)],
        "database_url": database_url,
        "profiles": profiles,
        "llm_max_attempts": 2,
        "llm_backoff_s": 0.0,
        "llm_retry_after_max_s": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


# The keys of a router run's outcome (`POST /router/runs`).
OUTCOME_KEYS = {
    "run_id",
    "status",
    "stopped_by",
    "text",
    "final",
    "attempts",
    "turns",
    "state",
    "receipts",
    "pending",
}


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield app, client


def run_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "owner": "agent",
        "goal": "Find out what toolloop is.",
        "context": {"trace_id": "t-1"},
        "router_profile": "router-small",
        "final_profile": "final-local",
    }
    body.update(overrides)
    return body


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
