"""The process-wide resources of a running service, opened in the lifespan."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.contract import Contract
from app.engine import CallPipeline, Engine, PlanLimits, RemoteTools
from app.foundation.signing import CheckpointSigner, load_signer
from app.observability.calls import MeteredSinks
from app.observability.exposition import forget_this_process
from app.observability.tracing import Tracing
from app.service.cache_store import DatabaseCacheStore
from app.service.confirmations import ConfirmationService
from app.service.errors import RunRunningElsewhere
from app.service.idempotency import AnsweringRuns, IdempotencyService
from app.service.plans.executor import LocalExecutor, PlanExecutor
from app.service.plans.service import PlanService
from app.service.remote_tools import open_remote_tools
from app.service.router.service import RouterService
from app.service.router.setup import open_router
from app.service.runs.control import RemoteStop
from app.service.runs.events import RunEventHub
from app.service.runs.relay import RUNS_CHANNEL, RunEventRelay
from app.service.runs.replicas import RunReplicas, instance_channel
from app.service.runs.tasks import RunSupervisor
from app.settings import Settings
from app.store.database import (
    DatabaseUnavailable,
    check_database,
    create_database_engine,
    create_session_factory,
    create_writer_engine,
    database_target,
    display_url,
    postgres_conninfo,
    sqlite_file,
    sqlite_pragmas,
)
from app.store.journal.postgres.process import PostgresStatementFailed, PostgresWriterProcess
from app.store.journal.sqlite.checkpoints import WalCheckpointer
from app.store.journal.sqlite.process import SqliteWriterProcess, WriterProcessGone
from app.store.journal.writer import GroupCommitWriter
from app.store.migrate import upgrade_database
from app.store.notices import PostgresNotices
from app.store.repositories.contract_snapshots import ContractSnapshotRepository
from app.store.repositories.instances import InstanceRepository
from app.store.repositories.runs import RunRepository
from app.store.shared_limits import PostgresSharedLimits

logger = logging.getLogger("toolloop.runtime")


@dataclass
class Runtime:
    settings: Settings
    contract: Contract
    database: AsyncEngine
    writer_database: AsyncEngine  # `database` itself on SQLite
    sessions: async_sessionmaker[AsyncSession]
    instance_id: str
    database_display: str
    writer: GroupCommitWriter
    call_metrics: MeteredSinks
    engine: Engine
    plans: PlanService
    router: RouterService
    confirmations: ConfirmationService
    llm_http: httpx.AsyncClient
    events: RunEventHub
    runs: RunSupervisor
    idempotency: IdempotencyService
    checkpointer: WalCheckpointer | None = None  # SQLite files, when configured
    sqlite_process: SqliteWriterProcess | None = None  # SQLite files, when configured
    postgres_process: PostgresWriterProcess | None = None  # PostgreSQL, when configured
    remote_tools: RemoteTools | None = None  # the contract's MCP tools, when it has some
    shared_limits: PostgresSharedLimits | None = None  # PostgreSQL, when a tool has limits
    # PostgreSQL: the other processes on the database, reached by LISTEN/NOTIFY.
    notices: PostgresNotices | None = None
    replicas: RunReplicas | None = None
    _background: list[asyncio.Task[None]] = field(default_factory=list)

    def unavailable_tools(self) -> dict[str, str]:
        """Remote tools that cannot be called now -> why (empty without remote tools)."""
        if self.remote_tools is None:
            return {}
        return {tool_id: m.reason for tool_id, m in sorted(self.remote_tools.unavailable().items())}

    async def database_problem(self) -> str | None:
        try:
            await check_database(self.database)
        except DatabaseUnavailable as exc:
            return str(exc)
        return None

    async def stop_elsewhere(self, run_id: str, owner: str) -> RemoteStop:
        """A cancel of a run this process does not execute: the executor's, for a run an
        orchestrator runs; else the replica's that executes it."""
        stopped = await self.plans.executor.stop_orchestrated(run_id, owner)
        if stopped is not None:
            return stopped
        if self.replicas is None:
            raise RunRunningElsewhere(run_id)
        return await self.replicas.stop_elsewhere(run_id, owner)

    def relay_run_end(self, run_id: str, status: str) -> None:
        """A run that no process supervises here ended here (a worker recorded the end
        of a run on Temporal): the processes that follow it hear of it."""
        ends = self.events if self.replicas is None else self.replicas.relay
        ends.end(run_id, status)

    async def executor_problem(self) -> str | None:
        """Why plans cannot run now besides the database (None: they can)."""
        return await self.plans.executor.problem()

    async def begin_shutdown(self) -> None:
        """Stop every run `interrupted` and end every event stream (each with a final
        event), so that the open requests finish and the service can stop."""
        await self.runs.aclose()
        self.events.close()

    async def aclose(self) -> None:
        await self.runs.aclose()
        self.events.close()
        if self.replicas is not None:
            await self.replicas.aclose()
        if self.notices is not None:
            await self.notices.aclose()  # after the runs' ends: they are relayed
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.engine.aclose()
        if self.remote_tools is not None:
            await self.remote_tools.aclose()
        self.call_metrics.flush()
        await self.llm_http.aclose()
        self.plans.close()
        self.router.close()
        await self.writer.aclose()
        if self.sqlite_process is not None:
            await self.sqlite_process.aclose()
        if self.postgres_process is not None:
            await self.postgres_process.aclose()
        if self.shared_limits is not None:
            await self.shared_limits.aclose()
        with suppress(SQLAlchemyError):
            async with self.sessions.begin() as session:
                await InstanceRepository(session).remove(self.instance_id)
        if self.checkpointer is not None:
            await self.checkpointer.stop()
        if self.writer_database is not self.database:
            await self.writer_database.dispose()
        await self.database.dispose()
        forget_this_process()


async def open_runtime(
    settings: Settings,
    contract: Contract,
    tracing: Tracing | None = None,
    executor: PlanExecutor | None = None,
) -> Runtime:
    """Connect, migrate, snapshot the contract, register this process, recover old runs.

    With `tracing`, runs, calls and model requests are traced; without, nothing
    of tracing is on their paths. `executor`: where plans run (default: here).

    Raises DatabaseUnavailable when the database cannot be reached.
    """
    checkpointer = _wal_checkpointer(settings)
    database = create_database_engine(
        settings.database_url,
        sqlite_wal_autocheckpoint=None if checkpointer is None else checkpointer.commit_bound_pages,
    )
    notices: PostgresNotices | None = None
    try:
        await upgrade_database(settings.database_url)
        sessions = create_session_factory(database)
        instance_id = uuid.uuid4().hex
        async with sessions.begin() as session:
            await ContractSnapshotRepository(session).save_if_absent(
                contract.hash, dict(contract.canonical), len(contract.tools)
            )
            await InstanceRepository(session).register(
                instance_id, hostname=socket.gethostname(), pid=os.getpid()
            )
        await _forget_dead_local_instances(sessions)
        await _mark_interrupted(sessions, instance_id, settings.instance_stale_after_s)
        sqlite_process = await _sqlite_writer_process(settings, checkpointer)
        postgres_process = await _postgres_writer_process(settings)
        notices = _notices(settings, instance_id)
        shared_limits = await _shared_limits(settings, contract, notices)
    except BaseException:
        if notices is not None:
            await notices.aclose()
        await database.dispose()
        raise
    writer_database = create_writer_engine(settings.database_url, database)
    writer = GroupCommitWriter(
        create_session_factory(writer_database),
        linger_s=commit_linger_s(settings, sqlite_process),
        linger_min_open_runs=settings.group_commit_linger_min_open_runs,
        max_stored_output_bytes=settings.max_stored_output_bytes,
        wal=checkpointer,
        sqlite_process=sqlite_process,
        postgres_process=postgres_process,
        checkpoint_runs=settings.chain_checkpoint_runs,
        checkpoint_signer=checkpoint_signer(settings),
    )
    events = RunEventHub()
    writer.add_listener(events.publish_receipts)
    relay = None if notices is None else RunEventRelay(events, notices)
    if relay is not None:
        writer.add_listener(relay.publish_receipts)
    writer.start()
    # Bound to their connections from here on; the hash is the same.
    contract, remote_tools = await open_remote_tools(contract, settings.mcp_max_connections)
    sinks = MeteredSinks(writer, writer, contract)
    engine = Engine(
        contract,
        receipts=sinks,
        audit=sinks,
        cache=DatabaseCacheStore(sessions),
        backpressure=writer,
        worker_threads=settings.worker_threads,
        max_cached_output_bytes=settings.max_stored_output_bytes,
        pipeline_factory=CallPipeline if tracing is None else tracing.pipeline_factory(),
        shared_limits=shared_limits,
    )
    limits = PlanLimits(
        max_sequential_calls=settings.max_sequential_calls,
        max_lanes=settings.max_lanes,
        max_calls_per_lane=settings.max_calls_per_lane,
        max_concurrency_cap=settings.max_concurrency_cap,
    )
    llm_http = httpx.AsyncClient()
    run_ends = events if relay is None else relay
    runs = (
        RunSupervisor(sessions, run_ends)
        if tracing is None
        else RunSupervisor(sessions, run_ends, wrap_run=tracing.run)
    )
    answering = AnsweringRuns(instance_id, settings.instance_stale_after_s, runs.is_active)
    plans = PlanService(
        contract,
        engine,
        sessions,
        writer,
        limits,
        instance_id,
        settings.max_stored_output_bytes,
        LocalExecutor() if executor is None else executor,
    )
    router = (
        open_router(settings, contract, engine, sessions, writer, instance_id, llm_http)
        if tracing is None
        else open_router(
            settings,
            contract,
            engine,
            sessions,
            writer,
            instance_id,
            llm_http,
            wrap_model=tracing.chat_model,
        )
    )
    router.executor = plans.executor.router_executor()
    runtime = Runtime(
        settings=settings,
        contract=contract,
        database=database,
        writer_database=writer_database,
        sessions=sessions,
        instance_id=instance_id,
        database_display=display_url(settings.database_url),
        writer=writer,
        call_metrics=sinks,
        engine=engine,
        plans=plans,
        router=router,
        confirmations=ConfirmationService(plans, router, runs, settings.confirmation_ttl_s),
        llm_http=llm_http,
        events=events,
        runs=runs,
        idempotency=IdempotencyService(
            sessions, settings.idempotency_ttl_s, writer, answering=answering
        ),
        checkpointer=checkpointer,
        sqlite_process=sqlite_process,
        postgres_process=postgres_process,
        remote_tools=remote_tools if remote_tools else None,
        shared_limits=shared_limits,
    )
    if notices is not None and relay is not None:
        runtime.notices = notices
        runtime.replicas = RunReplicas(
            instance_id,
            sessions,
            events,
            relay,
            runs,
            notices,
            stale_after_s=settings.instance_stale_after_s,
            cancel_wait_s=settings.run_cancel_wait_s,
        )
        try:
            await notices.start(runtime.replicas.receive)
        except psycopg.Error as exc:
            await runtime.aclose()
            raise DatabaseUnavailable(database_target(settings.database_url), str(exc)) from exc
    runtime._background.append(asyncio.create_task(_keep_alive(runtime), name="toolloop-heartbeat"))
    runtime._background.append(
        asyncio.create_task(
            runtime.idempotency.purge_forever(settings.idempotency_purge_interval_s),
            name="toolloop-idempotency-purge",
        )
    )
    runtime._background.append(
        asyncio.create_task(
            runtime.confirmations.expire_forever(settings.confirmation_expiry_interval_s),
            name="toolloop-confirmation-expiry",
        )
    )
    if checkpointer is not None:
        checkpointer.start()  # after the migration: it opens the database file, never creates it
    logger.info("contract %s loaded with %d tools", contract.hash, len(contract.tools))
    return runtime


def _notices(settings: Settings, instance_id: str) -> PostgresNotices | None:
    conninfo = postgres_conninfo(settings.database_url)
    if conninfo is None:
        return None
    return PostgresNotices(conninfo, (instance_channel(instance_id), RUNS_CHANNEL))


# A commit's wait for more rows, unless configured: the writer process commits
# beside the loop, and there a wait only keeps a request from its answer
# (docs/decisions.md, "The group commit").
LINGER_S = 0.002
LINGER_S_WITH_WRITER_PROCESS = 0.0


def commit_linger_s(settings: Settings, sqlite_process: SqliteWriterProcess | None) -> float:
    if settings.group_commit_linger_s is not None:
        return settings.group_commit_linger_s
    return LINGER_S if sqlite_process is None else LINGER_S_WITH_WRITER_PROCESS


async def _sqlite_writer_process(
    settings: Settings, checkpointer: WalCheckpointer | None
) -> SqliteWriterProcess | None:
    path = sqlite_file(settings.database_url)
    if path is None or not settings.sqlite_writer_process:
        return None
    bound = None if checkpointer is None else checkpointer.commit_bound_pages
    process = SqliteWriterProcess(path, sqlite_pragmas(bound))
    try:
        await process.start()
    except WriterProcessGone as exc:
        raise DatabaseUnavailable(database_target(settings.database_url), str(exc)) from exc
    return process


async def _postgres_writer_process(settings: Settings) -> PostgresWriterProcess | None:
    conninfo = postgres_conninfo(settings.database_url)
    if conninfo is None or not settings.postgres_writer_process:
        return None
    process = PostgresWriterProcess(conninfo)
    try:
        await process.start()
    except (WriterProcessGone, PostgresStatementFailed) as exc:
        await process.aclose()
        reason = exc.error if isinstance(exc, PostgresStatementFailed) else exc
        raise DatabaseUnavailable(database_target(settings.database_url), str(reason)) from exc
    return process


async def _shared_limits(
    settings: Settings, contract: Contract, notices: PostgresNotices | None
) -> PostgresSharedLimits | None:
    """On PostgreSQL, tools' limits hold across every process sharing the database: a
    process cannot know it is alone. Not opened when no tool declares a limit."""
    conninfo = postgres_conninfo(settings.database_url)
    limited = any(
        tool.max_concurrency is not None or tool.rate_limit is not None
        for tool in contract.tools.values()
    )
    if conninfo is None or notices is None or not limited:
        return None
    shared = PostgresSharedLimits(conninfo, database_target(settings.database_url), notices)
    await shared.start()
    return shared


def _wal_checkpointer(settings: Settings) -> WalCheckpointer | None:
    path = sqlite_file(settings.database_url)
    if path is None or not settings.sqlite_checkpoint_interval_s:
        return None
    return WalCheckpointer(
        path,
        interval_s=settings.sqlite_checkpoint_interval_s,
        long_pages=settings.sqlite_wal_long_pages,
        idle_interval_s=settings.sqlite_checkpoint_idle_interval_s,
    )


async def _forget_dead_local_instances(sessions: async_sessionmaker[AsyncSession]) -> None:
    """Drop instance rows of processes on this host that no longer exist.

    Their runs then count as orphaned at once, instead of after the heartbeat
    goes stale. A reused pid only delays that to the stale-heartbeat sweep.
    """
    async with sessions.begin() as session:
        instances = InstanceRepository(session)
        for instance in await instances.list_for_host(socket.gethostname()):
            if not _process_exists(instance.pid):
                await instances.remove(instance.id)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _mark_interrupted(
    sessions: async_sessionmaker[AsyncSession], instance_id: str, stale_after_s: float
) -> int:
    stale_before = datetime.now(UTC) - timedelta(seconds=stale_after_s)
    async with sessions.begin() as session:
        count = await RunRepository(session).mark_interrupted_for_dead_instances(
            instance_id, stale_before
        )
    if count:
        logger.warning("marked %d run(s) of stopped processes as interrupted", count)
    return count


async def _keep_alive(runtime: Runtime) -> None:
    """Heartbeat this process and sweep runs whose process stopped beating."""
    interval = runtime.settings.heartbeat_interval_s
    while True:
        await asyncio.sleep(interval)
        try:
            async with runtime.sessions.begin() as session:
                instances = InstanceRepository(session)
                if not await instances.heartbeat(runtime.instance_id):
                    # Another process judged this one dead; it is alive, so say so again.
                    await instances.register(
                        runtime.instance_id, hostname=socket.gethostname(), pid=os.getpid()
                    )
            await _mark_interrupted(
                runtime.sessions, runtime.instance_id, runtime.settings.instance_stale_after_s
            )
        except SQLAlchemyError as exc:
            logger.warning("heartbeat failed: %s", exc)


def checkpoint_signer(settings: Settings) -> CheckpointSigner | None:
    """The operator's key for the chain's checkpoints, when one is configured;
    raises SigningKeyError (saying why) for a key that cannot be used."""
    if settings.checkpoint_signing_key is None:
        return None
    return load_signer(settings.checkpoint_signing_key)
