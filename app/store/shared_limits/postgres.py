"""`SharedLimits` on PostgreSQL: advisory locks for slots, one row per token bucket.

A slot is a session-level advisory lock (`keys.slot_key`) on this process's one
slots connection, so the server gives every slot of a process back when its
session ends: a process killed with -9 closes its socket at once; a host that
vanishes is found by the server's TCP keepalives set on the session (within
about 25 s). A release unlocks and notifies `keys.CHANNEL` in one statement,
sent ahead of the connection's next statement in the same round trip (alone when
none is waiting);
waiters listen through the process's notices (`app.store.notices`), and re-try
every `poll_s` without a notification (a dead process notifies nobody).

A released slot stays locked, idle, on this process's session: the tool's next
call here takes it back with no statement (at most the tool's limit are held,
busy and idle together). A process that finds no slot free notifies
`keys.WANTED_CHANNEL` with the tool id; every other process unlocks that tool's
idle slots at once and stops keeping them until nobody has asked for `yield_s`,
so busy processes share the slots instead of each keeping its own.

Statements run one at a time on the slots connection, in a task of their own, so
a waiter cancelled mid-statement leaves the connection usable and gives back a
slot the statement took. The session re-enters locks it holds, so a release
still on its way and a new take of the same slot count right.

When the connection breaks, the server frees this process's slots while its
calls may still be running: those calls run to their end, counted here as
orphans (their release unlocks nothing), and the tool's limit may be exceeded
by them until they end. Waiters re-try until they connect again or their
deadline passes: nothing is admitted without the database.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Coroutine
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar

import psycopg

from app.store.database import DatabaseUnavailable
from app.store.notices import CLIENT_KEEPALIVES, PostgresNotices
from app.store.shared_limits.keys import CHANNEL, NAMESPACE, WANTED_CHANNEL, slot_keys

logger = logging.getLogger("toolloop.shared_limits")

T = TypeVar("T")

POLL_S = 1.0

# How long after another process last asked for a tool's slots this one gives each
# slot back on release instead of keeping it idle.
YIELD_S = 5.0

# The server's keepalives on the slots session: an unreachable host's slots are
# freed after 10 s idle and 3 unanswered probes 5 s apart.
_SERVER_KEEPALIVES = (
    "SET tcp_keepalives_idle = 10",
    "SET tcp_keepalives_interval = 5",
    "SET tcp_keepalives_count = 3",
)

# The executor pulls one row at a time through the filter: locks are tried in
# order and the first one taken ends the scan.
_TRY_LOCK = (
    "SELECT s.i FROM unnest(%s::int4[], %s::int4[]) AS s(i, k)"
    " WHERE pg_try_advisory_lock(%s, s.k) LIMIT 1"
)
_ASK = "SELECT pg_notify(%s, %s)"
_UNLOCK = (
    "SELECT pg_advisory_unlock(%s, u.k), pg_notify(%s, u.tool)"
    " FROM unnest(%s::int4[], %s::text[]) AS u(k, tool)"
)

# One statement: refill by the time passed on the server's clock (never backwards),
# take a token, and say how long until it is due; taken only when that wait fits.
_TAKE_TOKEN = """
INSERT INTO tool_buckets AS b (tool_id, tokens, updated_s)
VALUES (%(tool)s, %(burst)s - 1.0, extract(epoch FROM clock_timestamp())::float8)
ON CONFLICT (tool_id) DO UPDATE SET
    tokens = LEAST(%(burst)s, b.tokens
                   + GREATEST(0.0, EXCLUDED.updated_s - b.updated_s) * %(rate)s) - 1.0,
    updated_s = GREATEST(b.updated_s, EXCLUDED.updated_s)
WHERE %(max_wait)s::float8 IS NULL
   OR 1.0 - LEAST(%(burst)s, b.tokens
                  + GREATEST(0.0, EXCLUDED.updated_s - b.updated_s) * %(rate)s)
      <= %(max_wait)s::float8 * %(rate)s
RETURNING b.tokens, b.updated_s - extract(epoch FROM clock_timestamp())::float8
"""


def _unlock_params(unlocks: list[tuple[int, str]]) -> tuple[Any, ...]:
    return NAMESPACE, CHANNEL, [key for key, _ in unlocks], [tool for _, tool in unlocks]


class _Unavailable(Exception):
    """The slots connection is down; the caller waits and re-tries."""


class PostgresSharedLimits:
    def __init__(
        self,
        conninfo: str,
        target: str,
        notices: PostgresNotices,
        *,
        poll_s: float = POLL_S,
        yield_s: float = YIELD_S,
    ) -> None:
        """`target`: where the database is, as `DatabaseUnavailable` names it;
        `notices`: the process's, which this listens through."""
        self._conninfo = conninfo
        self._notices = notices
        self._target = target
        self._poll_s = poll_s
        self._yield_s = yield_s
        # Statements sent on the slots connection so far (for tests and metrics).
        self.statements = 0
        self._conn: psycopg.AsyncConnection[Any] | None = None
        # Sessions opened so far: the first must open at start.
        self._generation = 0
        self._statements = asyncio.Lock()
        self._keys: dict[str, tuple[int, ...]] = {}
        # Slot indices per tool: in use by a call, and locked but idle.
        self._held: dict[str, list[int]] = {}
        self._idle: dict[str, list[int]] = {}
        # Per tool, until when (monotonic clock) released slots are unlocked at once.
        self._yielding: dict[str, float] = {}
        self._orphans: dict[str, int] = {}
        # Releases not yet sent (key, tool id): sent together, ahead of the next
        # statement or on their own.
        self._unlocks: list[tuple[int, str]] = []
        self._flushing: asyncio.Task[None] | None = None
        self._wakeups: dict[str, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def start(self) -> None:
        """Connect; raises DatabaseUnavailable when the database cannot be reached."""
        try:
            async with self._statements:
                await self._connected()
            # Releases may go unheard while the notices' connection is lost.
            await self._notices.listen((CHANNEL, WANTED_CHANNEL), self._heard, self._wake_all)
        except psycopg.OperationalError as exc:
            await self.aclose()
            raise DatabaseUnavailable(self._target, str(exc)) from exc

    async def aclose(self) -> None:
        self._closed = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5.0)
        async with self._statements:
            self._idle.clear()
            if self._conn is not None:
                await self._conn.close()  # the session's locks, idle ones too, go with it
                self._conn = None

    @property
    def held(self) -> dict[str, int]:
        """Slots this process's calls use per tool, orphans included (for tests and
        metrics); idle slots are in `idle`."""
        tools = self._held.keys() | self._orphans.keys()
        return {tool: len(self._held.get(tool, ())) + self._orphans.get(tool, 0) for tool in tools}

    @property
    def idle(self) -> dict[str, int]:
        """Slots this process holds locked with no call using them, per tool."""
        return {tool: len(idle) for tool, idle in self._idle.items()}

    # -- slots ------------------------------------------------------------

    async def take_slot(self, tool_id: str, limit: int) -> None:
        if self.take_idle_slot(tool_id, limit):
            return
        while True:
            wakeup = self._wakeup(tool_id)
            attempt = self._in_task(self._try_lock(tool_id, limit))
            try:
                taken = await asyncio.shield(attempt)
            except asyncio.CancelledError:
                attempt.add_done_callback(partial(self._give_if_taken, tool_id))
                raise
            except _Unavailable:
                taken = False
            if taken:
                return
            await asyncio.wait((wakeup,), timeout=self._poll_s)

    def give_slot(self, tool_id: str) -> None:
        orphans = self._orphans.get(tool_id, 0)
        if orphans:
            self._orphans[tool_id] = orphans - 1  # its lock went with the old session
            return
        held = self._held.get(tool_id)
        if not held:
            return
        index = held.pop()
        if self._yielding.get(tool_id, 0.0) <= time.monotonic():
            self._idle.setdefault(tool_id, []).append(index)
            return
        self._unlock(tool_id, index)

    def _unlock(self, tool_id: str, index: int) -> None:
        self._unlocks.append((self._keys[tool_id][index], tool_id))
        if self._flushing is None:
            self._flushing = self._in_task(self._flush_unlocks())

    def take_idle_slot(self, tool_id: str, limit: int) -> bool:
        """Take a slot this process holds idle, with no statement."""
        idle = self._idle.get(tool_id)
        if not idle or len(self._keys[tool_id]) != limit:
            return False
        self._held[tool_id].append(idle.pop())
        return True

    def _give_back_idle(self, tool_id: str) -> None:
        """Another process asked for the tool's slots: unlock the idle ones now and
        keep none for a while."""
        self._yielding[tool_id] = time.monotonic() + self._yield_s
        idle = self._idle.pop(tool_id, None)
        for index in idle or ():
            self._unlock(tool_id, index)

    async def _try_lock(self, tool_id: str, limit: int) -> bool:
        async with self._statements:
            conn = await self._connected()
            if self.take_idle_slot(tool_id, limit):
                return True  # released while this waited for the connection
            keys = self._keys.get(tool_id)
            if keys is None or len(keys) != limit:
                for index in self._idle.pop(tool_id, ()):  # keys of the old limit
                    self._unlock(tool_id, index)
                keys = self._keys[tool_id] = slot_keys(tool_id, limit)
            held = self._held.setdefault(tool_id, [])
            free = [index for index in range(limit) if index not in held]
            if not free:
                return False
            # From a random place, so that processes do not all try slot 0 first.
            start = random.randrange(len(free))
            order = free[start:] + free[:start]
            rows = await self._execute(
                conn, _TRY_LOCK, ([*order], [keys[index] for index in order], NAMESPACE), True
            )
            if not rows:
                await self._execute(conn, _ASK, (WANTED_CHANNEL, tool_id))
                return False
            held.append(int(rows[0][0]))
            return True

    async def _flush_unlocks(self) -> None:
        async with self._statements:
            self._flushing = None
            unlocks, self._unlocks = self._unlocks, []
            if unlocks and self._conn is not None:
                with suppress(_Unavailable):
                    await self._execute(self._conn, _UNLOCK, _unlock_params(unlocks))

    def _give_if_taken(self, tool_id: str, attempt: asyncio.Task[bool]) -> None:
        if not attempt.cancelled() and attempt.exception() is None and attempt.result():
            self.give_slot(tool_id)

    # -- tokens -----------------------------------------------------------

    async def take_token(
        self, tool_id: str, per_second: float, burst: int, max_wait_s: float | None
    ) -> float | None:
        params = {"tool": tool_id, "burst": float(burst), "rate": per_second}
        while True:
            if max_wait_s is not None and max_wait_s < 0.0:
                return None
            params["max_wait"] = max_wait_s
            loop = asyncio.get_running_loop()
            asked_at = loop.time()
            try:
                # A cancelled waiter's token is forfeited: capacity lost, never exceeded.
                rows = await asyncio.shield(self._in_task(self._bucket(dict(params))))
            except _Unavailable:
                await asyncio.sleep(self._poll_s)
                if max_wait_s is not None:
                    max_wait_s -= loop.time() - asked_at
                continue
            if not rows:
                return None
            tokens, lead_s = float(rows[0][0]), float(rows[0][1])
            return max(0.0, lead_s + (-tokens / per_second if tokens < 0.0 else 0.0))

    async def _bucket(self, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        async with self._statements:
            return await self._execute(await self._connected(), _TAKE_TOKEN, params, True)

    # -- the connections --------------------------------------------------

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        """The slots connection, connected again if it was lost. Holds `_statements`."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if conn is not None:
            self._lost()
        if self._closed:
            raise _Unavailable
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, **CLIENT_KEEPALIVES
            )
            for statement in _SERVER_KEEPALIVES:
                await conn.execute(statement)
        except psycopg.OperationalError as exc:
            if self._generation == 0:
                raise  # at start: the service cannot start without it
            logger.warning("shared admission limits: cannot connect: %s", exc)
            raise _Unavailable from exc
        self._conn = conn
        self._generation += 1
        return conn

    async def _execute(
        self,
        conn: psycopg.AsyncConnection[Any],
        sql: str,
        params: Any,
        after_unlocks: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Run `sql`; with `after_unlocks`, the releases waiting to be sent go first,
        in the same round trip. Holds `_statements`."""
        unlocks = self._unlocks if after_unlocks else []
        try:
            if not unlocks:
                self.statements += 1
                return await (await conn.execute(sql, params)).fetchall()
            self._unlocks = []
            self.statements += 2
            async with conn.pipeline():
                await conn.execute(_UNLOCK, _unlock_params(unlocks))
                return await (await conn.execute(sql, params)).fetchall()
        except psycopg.OperationalError as exc:
            logger.warning("shared admission limits: connection lost: %s", exc)
            with suppress(psycopg.Error):
                await conn.close()
            self._lost()
            raise _Unavailable from exc

    def _lost(self) -> None:
        """The session ended: the server freed its locks; calls still running hold
        none now."""
        self._conn = None
        self._generation += 1
        self._unlocks = []  # the session's locks went with it
        self._idle.clear()
        for tool_id, held in self._held.items():
            if held:
                self._orphans[tool_id] = self._orphans.get(tool_id, 0) + len(held)
                held.clear()
        self._wake_all()

    # -- waking -----------------------------------------------------------

    def _heard(self, notice: psycopg.Notify) -> None:
        if notice.channel == CHANNEL:
            self._wake(notice.payload)
            return
        slots = self._conn
        if slots is None or notice.pid != slots.info.backend_pid:  # not our own ask
            self._give_back_idle(notice.payload)

    def _wakeup(self, tool_id: str) -> asyncio.Future[None]:
        """The future the tool's next release resolves: taken before a try, so that a
        release during the try is not missed."""
        future = self._wakeups.get(tool_id)
        if future is None or future.done():
            future = self._wakeups[tool_id] = asyncio.get_running_loop().create_future()
        return future

    def _wake(self, tool_id: str) -> None:
        future = self._wakeups.pop(tool_id, None)
        if future is not None and not future.done():
            future.set_result(None)

    def _wake_all(self) -> None:
        for tool_id in list(self._wakeups):
            self._wake(tool_id)

    def _in_task(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
