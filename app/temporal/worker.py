"""`toolloop worker`: runs plans' and router runs' workflows and their activities, on
any number of machines.

A worker opens the same runtime as `serve` (the shared database, the journal,
the engine with its admission gates and sinks, the router with its model
profiles and prompts), so the receipts it writes are the local executor's, and
polls the task queue until SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import suppress
from datetime import timedelta

import psycopg
from temporalio.client import Client
from temporalio.worker import Worker

from app.contract import Contract
from app.service.runtime import Runtime, open_runtime
from app.settings import Settings
from app.store.database import DatabaseUnavailable, database_target
from app.temporal.activities import PlanActivities
from app.temporal.converter import DATA_CONVERTER
from app.temporal.relayed_runs import listen_for_watches
from app.temporal.router_activities import RouterActivities
from app.temporal.router_workflow import RouterWorkflow
from app.temporal.workflows import PlanWorkflow

logger = logging.getLogger("toolloop.temporal.worker")

# Heartbeats per heartbeat timeout: a missed one or two still keep the call.
HEARTBEATS_PER_TIMEOUT = 4
# On stop, calls in flight get this long to finish before they are cancelled.
GRACEFUL_SHUTDOWN = timedelta(seconds=10)


def settings_problem(settings: Settings) -> str | None:
    """Why these settings cannot run plans on Temporal (None: they can)."""
    if not settings.temporal_address:
        return "the temporal executor needs TOOLLOOP_TEMPORAL_ADDRESS (host:port)"
    if settings.database_url.startswith("sqlite"):
        return (
            "the temporal executor needs PostgreSQL: serve and its workers share one "
            "database, which an SQLite file cannot be across processes and machines"
        )
    return None


async def run_worker(settings: Settings, contract: Contract, stop: asyncio.Event) -> None:
    """Poll the task queue until `stop` is set. Raises RuntimeError (Temporal) or
    DatabaseUnavailable when either cannot be reached at start."""
    assert settings.temporal_address is not None
    client = await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=DATA_CONVERTER,
    )
    runtime = await open_runtime(settings, contract)
    try:
        await _relay_followed_runs(settings, runtime)
        heartbeat_every_s = settings.temporal_heartbeat_timeout_s / HEARTBEATS_PER_TIMEOUT
        plans = PlanActivities(runtime, heartbeat_every_s)
        routers = RouterActivities(runtime, heartbeat_every_s)
        worker = Worker(
            client,
            task_queue=settings.temporal_task_queue,
            workflows=[PlanWorkflow, RouterWorkflow],
            activities=[*plans.all(), *routers.all()],
            graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        )
        async with worker:
            logger.info(
                "worker polling %s on %s (contract %s)",
                settings.temporal_task_queue,
                settings.temporal_namespace,
                contract.hash,
            )
            await stop.wait()
    finally:
        await runtime.aclose()


async def _relay_followed_runs(settings: Settings, runtime: Runtime) -> None:
    """Relay the receipts of the runs a serve process follows (`relayed_runs`)."""
    if runtime.replicas is None or runtime.notices is None:
        return
    try:
        await listen_for_watches(runtime.notices, runtime.replicas.relay)
    except psycopg.Error as exc:
        raise DatabaseUnavailable(database_target(settings.database_url), str(exc)) from exc


async def serve_worker(settings: Settings, contract: Contract) -> None:
    """`run_worker` until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await run_worker(settings, contract, stop)
