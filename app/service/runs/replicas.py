"""Cancel and follow a run that executes in another process on the same PostgreSQL.

Every process listens on a channel of its own (`toolloop_<instance id>`) and on
the one they share (`RUNS_CHANNEL`). A cancel arriving where the run does not
execute goes to the process that executes it, which stops it exactly as a
local cancel does and answers with the run's end once it is stored; a stream
asks that process to relay the run (`RunEventRelay`) and waits for its yes
before it reads what is stored, so that no receipt falls between the two.
Relayed receipts are read here from the store. A run on Temporal
(`ORCHESTRATED`) is relayed by every `toolloop worker` that hears the watch on
the orchestrated runs' channel; this process renews that watch while a stream
here follows the run. Every wait is bounded: a
process found dead (its heartbeat stale) gets its runs marked `interrupted`,
as the sweep does; a live one that does not answer in time leaves the cancel
unconfirmed (503), and a stream falls back to polling the store.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.service.errors import CancelUnconfirmed, StorageUnavailable
from app.service.runs.control import RemoteStop
from app.service.runs.events import RunEventHub
from app.service.runs.relay import (
    ORCHESTRATED_WATCH_RENEW_S,
    NoticeSender,
    RunEventRelay,
    notice,
)
from app.service.runs.tasks import CANCELLED, INTERRUPTED, RunSupervisor
from app.store.repositories.instances import InstanceRepository
from app.store.repositories.receipts import ReceiptRepository, receipt_row
from app.store.repositories.runs import ORCHESTRATED, RUNNING, RunRepository

logger = logging.getLogger("toolloop.replicas")

# How long a stream waits for the executing process to start relaying its run.
FOLLOW_WAIT_S = 5.0


def instance_channel(instance_id: str) -> str:
    return f"toolloop_{instance_id}"


@dataclass
class RunReplicas:
    instance_id: str
    sessions: async_sessionmaker[AsyncSession]
    hub: RunEventHub
    relay: RunEventRelay
    supervisor: RunSupervisor
    notices: NoticeSender
    stale_after_s: float
    cancel_wait_s: float

    def __post_init__(self) -> None:
        self._refs = itertools.count(1)
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Relayed receipts and ends, delivered one after the other in the order they came.
        self._relayed: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._delivering: asyncio.Task[None] | None = None
        # Runs on Temporal followed here, whose watch is renewed.
        self._renewing: set[str] = set()

    # -- asking another process ---------------------------------------------------

    async def stop_elsewhere(self, run_id: str, owner: str) -> RemoteStop:
        """Cancel a run that `owner` executes; its status once stopped or ended.
        Raises CancelUnconfirmed, StorageUnavailable."""
        if not await self._alive(owner):
            return await self._interrupt(run_id)
        answer = await self._ask(owner, {"op": "cancel", "run": run_id}, self.cancel_wait_s)
        if answer is not None and answer["found"]:
            return RemoteStop(answer["status"], answer["stopping"])
        status = await self._status(run_id)
        if status != RUNNING:
            return RemoteStop(status or INTERRUPTED, stopping=False)
        if not await self._alive(owner):
            return await self._interrupt(run_id)
        raise CancelUnconfirmed(run_id, self.cancel_wait_s)

    async def follow(self, run_id: str, owner: str) -> bool:
        """Ask `owner` to relay the run here; whether it does (it executes the run)."""
        answer = await self._ask(owner, {"op": "watch", "run": run_id}, FOLLOW_WAIT_S)
        watching = answer is not None and bool(answer["watching"])
        if watching and owner == ORCHESTRATED and run_id not in self._renewing:
            self._renewing.add(run_id)
            self._spawn(self._renew_watch(run_id))
        return watching

    async def _renew_watch(self, run_id: str) -> None:
        """Watch the run on Temporal again while a stream here follows it."""
        try:
            while True:
                await asyncio.sleep(ORCHESTRATED_WATCH_RENEW_S)
                if not self.hub.subscriber_count(run_id):
                    return
                self.notices.send(
                    instance_channel(ORCHESTRATED), notice({"op": "watch", "run": run_id})
                )
        finally:
            self._renewing.discard(run_id)

    # -- notices --------------------------------------------------------------------

    def receive(self, channel: str, payload: str) -> None:
        """The listener's callback: every notice to this process, or to all."""
        message = orjson.loads(payload)
        op = message["op"]
        if op == "answer":
            waiting = self._answers.get(message["ref"])
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
        elif op in ("receipts", "end"):
            if self.hub.subscriber_count(message["run"]):
                self._relay(message)
        elif op == "watch":
            watching = self.supervisor.is_active(message["run"])
            if watching:
                self.relay.watch(message["run"])
            self._answer(message, {"watching": watching})
        elif op == "cancel":
            self._spawn(self._cancel_here(message))
        else:
            logger.warning("an unknown notice on %s: %s", channel, op)

    async def _cancel_here(self, message: dict[str, Any]) -> None:
        """What a local cancel does to a run of this process, then the answer."""
        handle = self.supervisor.get(message["run"])
        if handle is None:
            self._answer(message, {"found": False})
            return
        stopping = handle.request_stop(CANCELLED)
        try:
            status = (await handle.wait()).status
        except Exception:
            status = INTERRUPTED
        self._answer(message, {"found": True, "stopping": stopping, "status": status})

    def _relay(self, message: dict[str, Any]) -> None:
        self._relayed.put_nowait(message)
        if self._delivering is None:
            self._delivering = asyncio.create_task(self._deliver_forever())
            self._tasks.add(self._delivering)

    async def _deliver_forever(self) -> None:
        while True:
            message = await self._relayed.get()
            run_id = message["run"]
            if message["op"] == "end":
                self.hub.end(run_id, message["status"])
                continue
            try:
                async with self.sessions() as session:
                    rows = await ReceiptRepository(session).list_at(run_id, message["seqs"])
            except SQLAlchemyError as exc:
                logger.warning("relayed receipts of run %s could not be read: %s", run_id, exc)
                self.hub.lag(run_id)
                continue
            self.hub.publish_receipts([receipt_row(row) for row in rows])

    # -- internals ------------------------------------------------------------------

    async def _ask(
        self, owner: str, message: dict[str, Any], wait_s: float
    ) -> dict[str, Any] | None:
        ref = next(self._refs)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[ref] = answer
        try:
            self.notices.send(
                instance_channel(owner), notice({**message, "ref": ref, "from": self.instance_id})
            )
            async with asyncio.timeout(wait_s):
                return await answer
        except TimeoutError:
            return None
        finally:
            del self._answers[ref]

    def _answer(self, question: dict[str, Any], fields: dict[str, Any]) -> None:
        message = {"op": "answer", "ref": question["ref"], **fields}
        self.notices.send(instance_channel(question["from"]), notice(message))

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alive(self, instance_id: str) -> bool:
        try:
            async with self.sessions() as session:
                instance = await InstanceRepository(session).get(instance_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the instance could not be read: {exc}") from exc
        fresh_since = datetime.now(UTC) - timedelta(seconds=self.stale_after_s)
        return instance is not None and instance.heartbeat_at >= fresh_since

    async def _interrupt(self, run_id: str) -> RemoteStop:
        """The sweep, now: the runs of stopped processes end `interrupted`."""
        stale_before = datetime.now(UTC) - timedelta(seconds=self.stale_after_s)
        try:
            async with self.sessions.begin() as session:
                await RunRepository(session).mark_interrupted_for_dead_instances(
                    self.instance_id, stale_before
                )
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be marked interrupted: {exc}") from exc
        status = await self._status(run_id) or INTERRUPTED
        return RemoteStop(status, stopping=status == INTERRUPTED)

    async def _status(self, run_id: str) -> str | None:
        try:
            async with self.sessions() as session:
                run = await RunRepository(session).get(run_id)
        except SQLAlchemyError as exc:
            raise StorageUnavailable(f"the run could not be read: {exc}") from exc
        return None if run is None else run.status

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
