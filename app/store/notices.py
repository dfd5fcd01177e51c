"""PostgreSQL LISTEN/NOTIFY between the processes that share one database.

One autocommit connection per process listens on its channels; another sends.
Sending never waits: `send` queues the notice and a task sends what is queued,
several in one statement, in the order they were queued. PostgreSQL delivers
a notice only to connections listening when it commits, and limits a payload
to 8000 bytes, so payloads are small (ids, sequence numbers) and the receiver
reads the stored rows. A lost connection is opened again after `RECONNECT_S`;
notices sent meanwhile are lost, which the receivers allow for (they bound
every wait and read the store).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import suppress

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

logger = logging.getLogger("toolloop.notices")

MAX_PAYLOAD_BYTES = 7900  # PostgreSQL's limit is 8000, with room for the channel name
RECONNECT_S = 1.0
SEND_BATCH = 100
CLOSE_FLUSH_S = 2.0

OnNotice = Callable[[str, str], None]
Connection = psycopg.AsyncConnection[TupleRow]


class PostgresNotices:
    def __init__(self, conninfo: str, channels: Sequence[str]) -> None:
        self._conninfo = conninfo
        self._channels = tuple(channels)
        self._outbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._listener: Connection | None = None
        self._sender: Connection | None = None

    async def start(self, on_notice: OnNotice) -> None:
        """Listen (called with each notice's channel and payload) and send; returns
        once the first listening connection is open, so nothing sent after it is missed.

        Raises psycopg.Error when the database cannot be reached."""
        self._listener = await self._listen()
        self._tasks.append(asyncio.create_task(self._receive(on_notice), name="notices"))
        self._tasks.append(asyncio.create_task(self._send_forever(), name="notices-send"))

    def send(self, channel: str, payload: str) -> None:
        if len(payload.encode()) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"a notice payload is limited to {MAX_PAYLOAD_BYTES} bytes")
        self._outbox.put_nowait((channel, payload))

    async def aclose(self) -> None:
        """Send what is queued (for `CLOSE_FLUSH_S` at most), then close."""
        if self._tasks:
            with suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_FLUSH_S):
                    await self._outbox.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for connection in (self._listener, self._sender):
            if connection is not None:
                await connection.close()

    async def _listen(self) -> Connection:
        connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        try:
            for channel in self._channels:
                await connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _receive(self, on_notice: OnNotice) -> None:
        while True:
            assert self._listener is not None
            try:
                async for notice in self._listener.notifies():
                    try:
                        on_notice(notice.channel, notice.payload)
                    except Exception as exc:
                        logger.error("a notice could not be handled: %s", exc, exc_info=exc)
            except psycopg.Error as exc:
                logger.warning("the notice connection was lost: %s", exc)
            await self._listener.close()
            self._listener = None
            self._listener = await self._listen_again()

    async def _listen_again(self) -> Connection:
        while True:
            await asyncio.sleep(RECONNECT_S)
            try:
                return await self._listen()
            except psycopg.Error as exc:
                logger.warning("listening for notices failed: %s", exc)

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
        try:
            if self._sender is None:
                self._sender = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                )
            # One statement, one transaction: delivered together, in this order.
            await self._sender.execute(
                "SELECT pg_notify(c, p) FROM unnest(%s::text[], %s::text[]) AS n(c, p)",
                ([c for c, _ in batch], [p for _, p in batch]),
            )
        except psycopg.Error as exc:
            logger.warning("%d notice(s) could not be sent: %s", len(batch), exc)
            if self._sender is not None:
                await self._sender.close()
                self._sender = None
            await asyncio.sleep(RECONNECT_S)
