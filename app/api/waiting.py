"""Serving before the database is up (`--wait-for-database SECONDS`).

The service answers at once: `/healthz` 200, and every route that needs the
runtime (`/readyz` included) a 503 problem with `Retry-After` naming the
database problem. In the background it retries connecting, migrating and
recovering; once that succeeds it is ready. When the time is spent it records
the one-line reason and asks the server to stop (`toolloop serve` then exits 1).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from starlette.datastructures import State

from app.contract import Contract
from app.observability.tracing import Tracing
from app.service.plans.executor import PlanExecutor
from app.service.startup import open_runtime_waiting
from app.settings import Settings

logger = logging.getLogger("toolloop.startup")


@asynccontextmanager
async def runtime_when_reachable(
    state: State,
    settings: Settings,
    contract: Contract,
    tracing: Tracing | None = None,
    executor: PlanExecutor | None = None,
) -> AsyncIterator[None]:
    """Open the runtime into `state.runtime` in the background; close it on exit."""
    state.runtime = None
    state.database_problem = "the database has not answered yet"

    def waiting(problem: str) -> None:
        state.database_problem = problem

    async def open_later() -> None:
        try:
            state.runtime = await open_runtime_waiting(
                settings, contract, waiting, tracing, executor
            )
        except Exception as exc:
            state.startup_failure = f"{exc} (waited {settings.wait_for_database_s:g} s)"
            logger.error("giving up: %s", state.startup_failure)
            stop = getattr(state, "stop_serving", None)
            if stop is not None:
                stop()
            return
        logger.info("the database answered; the service is ready")

    task = asyncio.create_task(open_later(), name="toolloop-wait-for-database")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        if state.runtime is not None:
            await state.runtime.aclose()
