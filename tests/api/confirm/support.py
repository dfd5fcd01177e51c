"""Helpers for the confirmation tests over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.settings import Settings
from app.store.models import Confirmation
from app.store.repositories.router_runs import RouterRunRepository
from tests.api.confirm.registry import REGISTRY
from tests.support.app import AppFactory


def confirm_settings(directory: Path, database_url: str, **overrides: Any) -> Settings:
    return AppFactory(database_url, directory).settings(REGISTRY, **overrides)


def step(label: str, **extra: Any) -> dict[str, Any]:
    return {"call_key": label, "tool": "step", "args": {"label": label, **extra}}


def launch(label: str, **extra: Any) -> dict[str, Any]:
    return {"call_key": label, "tool": "launch", "args": {"label": label, **extra}}


def sequential(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "tester", "calls": list(calls), "context": {"trace_id": "t-1"}}


def parallel(*lanes: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "owner": "tester",
        "max_concurrency": 4,
        "lanes": [{"item_key": key, "calls": calls} for key, calls in lanes],
    }


async def decide(
    client: httpx.AsyncClient,
    run_id: str,
    confirmation_id: str,
    approve: bool,
    reason: str = "",
    **kwargs: Any,
) -> httpx.Response:
    return await client.post(
        f"/runs/{run_id}/confirmations/{confirmation_id}",
        json={"approve": approve, "reason": reason},
        **kwargs,
    )


async def stored_confirmations(app: FastAPI, run_id: str) -> list[Confirmation]:
    async with app.state.runtime.sessions() as session:
        return await RouterRunRepository(session).confirmations(run_id)
