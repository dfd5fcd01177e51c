"""SQLite WAL checkpoints from a thread of their own, off the writer's commits.

In WAL mode a commit appends pages to the `-wal` file, and a checkpoint copies
them back into the database file and syncs both files. By default the
connection whose commit takes the WAL past 1,000 pages runs that checkpoint
inside its commit: under load several times a second, each one a wait of
copies and two `fsync`s for every request in that group commit.

`WalCheckpointer` runs passive checkpoints (they never wait for, or hold up, a
writer or a reader) on a connection of its own, in a thread of its own, every
`interval_s` while the writer keeps committing (`note_commit`), and every
`idle_interval_s` when it does not: an idle thread sleeps instead of waking
twenty times a second to find nothing to copy. SQLite starts the WAL over only
at a write that finds every frame already copied, which a checkpointer racing a
busy writer seldom leaves (a pass copies the frames there when it began, and
the writer appends more meanwhile); so once a pass finds the WAL longer than
`long_pages`, `wal_is_long` asks the writer to wait, before its next
transaction, for one pass that starts after its last commit (`catch_up`): that
pass copies what is left, and the writer's next transaction starts the WAL
over. The engine's connections keep checkpointing in their commits past a
higher bound (`wal_autocheckpoint`), which holds even if this thread fails.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

logger = logging.getLogger("toolloop.store.checkpoints")


class WalKeeper(Protocol):
    """What the group commit asks of a WAL checkpointer (`WalCheckpointer`)."""

    @property
    def wal_is_long(self) -> bool: ...

    async def catch_up(self) -> None: ...

    def note_commit(self) -> None: ...


@dataclass(frozen=True, slots=True)
class CheckpointPass:
    """What one `PRAGMA wal_checkpoint(PASSIVE)` reported."""

    busy: bool  # another connection was checkpointing
    wal_frames: int  # frames in the WAL
    copied_frames: int  # of those, frames now in the database file


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class WalCheckpointer:
    """Passive checkpoints of one SQLite database file, in a thread: every
    `interval_s` while commits are noted, every `idle_interval_s` otherwise (for
    writes nobody noted), and whenever a writer waits for one (`catch_up`)."""

    def __init__(
        self, path: Path, *, interval_s: float, long_pages: int, idle_interval_s: float
    ) -> None:
        if interval_s <= 0 or long_pages <= 0 or idle_interval_s <= 0:
            raise ValueError("interval_s, idle_interval_s and long_pages must be positive")
        self._path = path
        self._interval_s = interval_s
        self._idle_interval_s = max(idle_interval_s, interval_s)
        self._long_pages = long_pages
        self._stopping = threading.Event()
        self._wanted = threading.Event()  # a writer waits for a pass, or an idle thread is woken
        self._committed = threading.Event()  # a commit was noted since the last pass began
        self._idle = False  # the thread sleeps for `idle_interval_s`
        self._lock = threading.Lock()  # guards _waiters and _finished
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._finished = False
        self._thread: threading.Thread | None = None
        self._long = False
        self.passes = 0
        self.caught_up = 0  # passes a writer waited for
        self.busy_passes = 0  # passes that found another connection checkpointing
        self.failures = 0
        self.last: CheckpointPass | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def idle(self) -> bool:
        """Whether the thread waits for its idle interval (or a noted commit)."""
        return self._idle

    @property
    def commit_bound_pages(self) -> int:
        """The `wal_autocheckpoint` for the engine's connections: past this, a commit
        checkpoints itself (a safety net, twice the length a writer waits at)."""
        return 2 * self._long_pages

    @property
    def wal_is_long(self) -> bool:
        """Whether the last pass found the WAL longer than `long_pages` (and no
        writer waited for it)."""
        return self._long

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the checkpointer was already started")
        self._thread = threading.Thread(
            target=self._run, name="toolloop-wal-checkpointer", daemon=True
        )
        self._thread.start()

    def note_commit(self) -> None:
        """A commit appended to the WAL: passes keep coming every `interval_s`, and
        an idle thread wakes for one now. Cheap enough for every commit."""
        if not self._committed.is_set():
            self._committed.set()
        # Read after the write above; the thread sets `_idle` before it reads
        # `_committed`: one of the two sees the other, so no commit is slept through.
        if self._idle:
            self._wanted.set()

    async def catch_up(self) -> None:
        """Return once a pass that started after this call has ended (at once when
        the checkpointer is not running). Never raises for a failed pass."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._thread is None or self._finished:
                return
            self._waiters.append((loop, future))
        self._wanted.set()
        await future

    async def stop(self) -> None:
        """Stop after the pass in progress, if any, and close the connection."""
        self._stopping.set()
        self._wanted.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    def _run(self) -> None:
        try:
            try:
                # mode=rw: never create a database; the service migrated it before this runs.
                connection = sqlite3.connect(
                    f"file:{quote(str(self._path))}?mode=rw",
                    uri=True,
                    timeout=0,
                    isolation_level=None,
                )
            except sqlite3.Error as exc:
                logger.warning("WAL checkpointer not started: %s; checkpoints stay in commits", exc)
                return
            try:
                self._loop(connection)
            finally:
                connection.close()
        finally:
            with self._lock:
                self._finished = True
                waiters, self._waiters = self._waiters, []
            self._long = False
            self._wake(waiters)

    def _loop(self, connection: sqlite3.Connection) -> None:
        while True:
            self._wait_for_a_pass()
            if self._stopping.is_set():
                return
            # Taken before the pass begins: each of these waiters asked before it,
            # and each commit noted from here on has frames this pass may miss.
            with self._lock:
                self._wanted.clear()
                waiters, self._waiters = self._waiters, []
            self._committed.clear()
            in_wal_mode = self._checkpoint(connection, for_waiters=bool(waiters))
            if waiters:
                self.caught_up += 1
                self._wake(waiters)
            if not in_wal_mode:
                return

    def _wait_for_a_pass(self) -> None:
        self._idle = True  # before `_committed` is read: see `note_commit`
        if self._committed.is_set():
            self._idle = False
            self._wanted.wait(self._interval_s)
        else:
            self._wanted.wait(self._idle_interval_s)
            self._idle = False

    def _checkpoint(self, connection: sqlite3.Connection, *, for_waiters: bool) -> bool:
        """One passive checkpoint; False when the database is not in WAL mode.

        A pass a writer waited for leaves nothing to copy behind that writer's
        last commit, and its next transaction starts the WAL over: no more
        waiting until a later pass finds the WAL long again."""
        try:
            busy, wal_frames, copied_frames = connection.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
        except sqlite3.Error as exc:
            self.failures += 1
            # A writer waiting for passes that fail would wait before every batch;
            # the commits' own checkpoint bound keeps the WAL in check meanwhile.
            self._long = False
            if self.failures == 1 or self.failures % 1000 == 0:
                logger.warning("WAL checkpoint failed (%d so far): %s", self.failures, exc)
            return True
        if wal_frames < 0:
            if busy:
                # Another connection holds the checkpoint lock (a commit past its own
                # bound, or another process): SQLite read nothing and reports -1, as
                # it does for a database not in WAL mode. The next pass tries again.
                self.busy_passes += 1
                self._long = False
                if self.busy_passes == 1 or self.busy_passes % 1000 == 0:
                    logger.info(
                        "WAL checkpoint pass found another connection checkpointing "
                        "(%d so far); the next pass tries again",
                        self.busy_passes,
                    )
                return True
            logger.info("WAL checkpointer stopped: %s is not in WAL mode", self._path)
            return False
        self.passes += 1
        self.last = CheckpointPass(bool(busy), wal_frames, copied_frames)
        self._long = wal_frames >= self._long_pages and not for_waiters
        return True

    @staticmethod
    def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
        for loop, future in waiters:
            with suppress(RuntimeError):  # its loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_set_done, future)
