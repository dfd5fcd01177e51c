"""PostgreSQL LISTEN/NOTIFY between the processes that share one database.

One autocommit connection per process listens on every channel the process's
parts ask for (`listen`) and sends their notices. Sending never waits: `send`
queues the notice and a task sends what is queued, several in one statement, in
the order they were queued; while it sends, the connection is not waited on for
notices, and those that arrive meanwhile are read when it is again (psycopg keeps
them). PostgreSQL delivers a notice only to connections listening when it
commits, the sending one too, and limits a payload to 8000 bytes, so payloads are
small (ids, sequence numbers) and the receiver reads the stored rows. A lost
connection is opened again after `RECONNECT_S`, listening on every channel, and
each part is told (`on_reopened`); notices sent meanwhile are lost, which the
receivers allow for (they bound every wait and read the store).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

logger = logging.getLogger("toolloop.notices")

MAX_PAYLOAD_BYTES = 7900  # PostgreSQL's limit is 8000, with room for the channel name
RECONNECT_S = 1.0
SEND_BATCH = 100
CLOSE_FLUSH_S = 2.0

# A host that vanishes is noticed after 10 s idle and 3 unanswered probes 5 s apart.
CLIENT_KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}

OnNotice = Callable[[str, str], None]
OnNotify = Callable[[psycopg.Notify], None]
Connection = psycopg.AsyncConnection[TupleRow]


class PostgresNotices:
    def __init__(self, conninfo: str, channels: Sequence[str] = ()) -> None:
        """`channels`: those `start` listens on."""
        self._conninfo = conninfo
        self._channels = tuple(channels)
        self._handlers: dict[str, list[OnNotify]] = {}
        self._reopened: list[Callable[[], None]] = []
        self._outbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._connection: Connection | None = None
        # Held to pause the receiving and use the connection (send, listen, reopen).
        self._using = asyncio.Lock()
        self._receiving: asyncio.Task[None] | None = None
        self._sending: asyncio.Task[None] | None = None
        self._reopening: asyncio.Task[None] | None = None

    async def start(self, on_notice: OnNotice) -> None:
        """Listen on the channels given at construction (`on_notice` is called with
        each notice's channel and payload) and send; see `listen`."""
        await self.listen(self._channels, lambda notice: on_notice(notice.channel, notice.payload))

    async def listen(
        self,
        channels: Iterable[str],
        on_notify: OnNotify,
        on_reopened: Callable[[], None] | None = None,
    ) -> None:
        """Call `on_notify` with each notice on `channels`, and `on_reopened` each
        time the connection is opened again after a loss; returns once the process
        listens on them, so nothing sent after it is missed.

        Raises psycopg.Error when the database cannot be reached."""
        channels = tuple(channels)
        async with self._using:
            await self._pause()
            connection = self._connection
            try:
                if connection is None:
                    self._connection = await self._open((*self._handlers, *channels))
                else:
                    await _listen(connection, [c for c in channels if c not in self._handlers])
            except psycopg.Error:
                if connection is not None:
                    self._lost(connection)
                raise
            for channel in channels:
                self._handlers.setdefault(channel, []).append(on_notify)
            if on_reopened is not None:
                self._reopened.append(on_reopened)
            self._resume()
        if self._sending is None:
            self._sending = asyncio.create_task(self._send_forever(), name="notices-send")

    def send(self, channel: str, payload: str) -> None:
        if len(payload.encode()) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"a notice payload is limited to {MAX_PAYLOAD_BYTES} bytes")
        self._outbox.put_nowait((channel, payload))

    async def aclose(self) -> None:
        """Send what is queued (for `CLOSE_FLUSH_S` at most), then close."""
        if self._sending is not None:
            with suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_FLUSH_S):
                    await self._outbox.join()
        for task in (self._sending, self._reopening):
            if task is not None:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
        async with self._using:
            await self._pause()
            if self._connection is not None:
                await self._connection.close()
                self._connection = None

    async def _open(self, channels: Iterable[str]) -> Connection:
        connection = await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, **CLIENT_KEEPALIVES
        )
        try:
            await _listen(connection, channels)
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _pause(self) -> None:
        """Stop waiting on the connection for notices (holding `_using`)."""
        receiving, self._receiving = self._receiving, None
        if receiving is not None:
            receiving.cancel()
            with suppress(asyncio.CancelledError):
                await receiving

    def _resume(self) -> None:
        if self._connection is not None:
            self._receiving = asyncio.create_task(
                self._receive(self._connection), name="notices-receive"
            )

    async def _receive(self, connection: Connection) -> None:
        try:
            async for notice in connection.notifies():
                for handle in self._handlers.get(notice.channel, ()):
                    try:
                        handle(notice)
                    except Exception as exc:
                        logger.error("a notice could not be handled: %s", exc, exc_info=exc)
        except psycopg.Error as exc:
            logger.warning("the notice connection was lost: %s", exc)
            self._lost(connection)

    def _lost(self, connection: Connection) -> None:
        if self._connection is not connection:
            return
        self._connection = None
        self._receiving = None
        if self._reopening is None:
            self._reopening = asyncio.create_task(self._reopen(connection), name="notices-reopen")

    async def _reopen(self, lost: Connection) -> None:
        with suppress(psycopg.Error):
            await lost.close()
        while True:
            await asyncio.sleep(RECONNECT_S)
            async with self._using:
                try:
                    if self._connection is None:
                        self._connection = await self._open(self._handlers)
                        self._resume()
                except psycopg.Error as exc:
                    logger.warning("listening for notices failed: %s", exc)
                    continue
                self._reopening = None
            for reopened in self._reopened:
                reopened()
            return

    async def _send_forever(self) -> None:
        while True:
            batch = [await self._outbox.get()]
            while len(batch) < SEND_BATCH and not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            try:
                await self._send(batch)
            finally:
                for _ in batch:
                    self._outbox.task_done()

    async def _send(self, batch: list[tuple[str, str]]) -> None:
        async with self._using:
            connection = self._connection
            if connection is None:
                logger.warning("%d notice(s) not sent: no notice connection", len(batch))
                return
            await self._pause()
            try:
                # One statement, one transaction: delivered together, in this order.
                await connection.execute(
                    "SELECT pg_notify(c, p) FROM unnest(%s::text[], %s::text[]) AS n(c, p)",
                    ([c for c, _ in batch], [p for _, p in batch]),
                )
            except psycopg.Error as exc:
                logger.warning("%d notice(s) could not be sent: %s", len(batch), exc)
                self._lost(connection)
                return
            self._resume()


async def _listen(connection: Connection, channels: Iterable[str]) -> None:
    for channel in channels:
        await connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
