"""Opening the runtime when the database may not be up yet (`wait_for_database_s`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.contract import Contract
from app.observability.tracing import Tracing
from app.service.plans.executor import PlanExecutor
from app.service.runtime import Runtime, open_runtime
from app.settings import Settings
from app.store.database import DatabaseUnavailable

logger = logging.getLogger("toolloop.startup")

FIRST_RETRY_S = 0.2
MAX_RETRY_S = 2.0


async def open_runtime_waiting(
    settings: Settings,
    contract: Contract,
    on_waiting: Callable[[str], None],
    tracing: Tracing | None = None,
    executor: PlanExecutor | None = None,
) -> Runtime:
    """`open_runtime` (connect, migrate, recover), retried while the database is
    unavailable, for at most `settings.wait_for_database_s`; `on_waiting` gets each
    problem. Raises the last DatabaseUnavailable once that time is spent."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.wait_for_database_s
    delay = FIRST_RETRY_S
    while True:
        try:
            return await open_runtime(settings, contract, tracing, executor)
        except DatabaseUnavailable as exc:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise
            on_waiting(str(exc))
            logger.warning("waiting for the database: %s", exc)
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, MAX_RETRY_S)
