"""An in-process service reached through httpx.ASGITransport, opened and closed at will."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings


@asynccontextmanager
async def service(
    settings: Settings, headers: dict[str, str] | None = None
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app and a client; leaving stops the service as a shutdown does (runs interrupted)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as client:
            yield app, client
