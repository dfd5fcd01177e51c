from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from app.store.journal.sqlite import checkpoints
from app.store.journal.sqlite.checkpoints import WalCheckpointer

# Long enough that no pass runs unless a test waits for one (`catch_up`).
NEVER_S = 3600.0


@pytest.fixture
def wal_database(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A WAL database file and a writer connection that never checkpoints itself."""
    path = tmp_path / "wal.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    try:
        yield path, writer
    finally:
        writer.close()


@pytest.fixture
async def started() -> AsyncIterator[list[WalCheckpointer]]:
    """Checkpointers a test starts, stopped after it."""
    checkpointers: list[WalCheckpointer] = []
    yield checkpointers
    for checkpointer in checkpointers:
        await checkpointer.stop()


def _write_pages(writer: sqlite3.Connection, pages: int) -> None:
    writer.executemany(
        "INSERT INTO t (body) VALUES (?)", [(os.urandom(1500).hex(),) for _ in range(pages)]
    )


def _start(started: list[WalCheckpointer], path: Path, **options: float) -> WalCheckpointer:
    checkpointer = WalCheckpointer(
        path,
        interval_s=options.get("interval_s", NEVER_S),
        long_pages=int(options.get("long_pages", 100)),
        idle_interval_s=options.get("idle_interval_s", NEVER_S),
    )
    checkpointer.start()
    started.append(checkpointer)
    return checkpointer


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(1000):  # a bound on the wait, not a timing assertion
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")


async def _next_periodic_pass(checkpointer: WalCheckpointer) -> None:
    passes = checkpointer.passes
    await _until(lambda: checkpointer.passes > passes, "a periodic pass")


@pytest.fixture
def idle_checkpointer(
    wal_database: tuple[Path, sqlite3.Connection], started: list[WalCheckpointer]
) -> tuple[WalCheckpointer, sqlite3.Connection]:
    """A started checkpointer that passes only when waited for, and the writer."""
    path, writer = wal_database
    return _start(started, path), writer


async def test_a_pass_copies_what_was_committed_and_the_next_write_starts_the_wal_over(
    idle_checkpointer: tuple[WalCheckpointer, sqlite3.Connection],
) -> None:
    checkpointer, writer = idle_checkpointer
    _write_pages(writer, 50)

    await checkpointer.catch_up()

    first = checkpointer.last
    assert first is not None
    assert first.wal_frames > 50
    assert first.copied_frames == first.wal_frames
    assert not first.busy
    _write_pages(writer, 1)
    await checkpointer.catch_up()
    assert checkpointer.last is not None
    assert checkpointer.last.wal_frames < first.wal_frames  # started over
    assert checkpointer.passes == 2


async def test_a_long_wal_asks_the_writer_to_wait_for_one_pass(
    wal_database: tuple[Path, sqlite3.Connection], started: list[WalCheckpointer]
) -> None:
    path, writer = wal_database
    checkpointer = _start(started, path, interval_s=0.01, long_pages=100)
    _write_pages(writer, 20)
    checkpointer.note_commit()
    await _next_periodic_pass(checkpointer)
    assert not checkpointer.wal_is_long

    _write_pages(writer, 200)
    checkpointer.note_commit()
    await _next_periodic_pass(checkpointer)
    assert checkpointer.wal_is_long

    await checkpointer.catch_up()  # the writer waits; nothing is left behind its commit
    assert not checkpointer.wal_is_long
    _write_pages(writer, 1)
    checkpointer.note_commit()
    await _next_periodic_pass(checkpointer)
    assert checkpointer.last is not None
    assert checkpointer.last.wal_frames < 100
    assert not checkpointer.wal_is_long


async def test_an_idle_checkpointer_sleeps_until_a_commit_is_noted(
    wal_database: tuple[Path, sqlite3.Connection], started: list[WalCheckpointer]
) -> None:
    path, writer = wal_database
    checkpointer = _start(started, path, interval_s=0.001)
    _write_pages(writer, 20)  # not noted

    await _until(lambda: checkpointer.idle, "the thread asleep for its idle interval")
    assert checkpointer.passes == 0

    checkpointer.note_commit()
    await _next_periodic_pass(checkpointer)
    assert checkpointer.last is not None
    assert checkpointer.last.copied_frames == checkpointer.last.wal_frames > 20


async def test_passes_follow_noted_commits_and_stop_with_them(
    wal_database: tuple[Path, sqlite3.Connection], started: list[WalCheckpointer]
) -> None:
    path, writer = wal_database
    checkpointer = _start(started, path, interval_s=0.005)
    for _ in range(3):
        _write_pages(writer, 2)
        checkpointer.note_commit()
        await _next_periodic_pass(checkpointer)

    # The pass seen last may have begun before the last note: one more may follow.
    settled = checkpointer.passes
    await _until(lambda: checkpointer.idle, "the thread asleep for its idle interval")
    assert settled <= checkpointer.passes <= settled + 1
    assert checkpointer.last is not None
    assert checkpointer.last.copied_frames == checkpointer.last.wal_frames


async def test_writes_nobody_noted_are_copied_every_idle_interval(
    wal_database: tuple[Path, sqlite3.Connection], started: list[WalCheckpointer]
) -> None:
    path, writer = wal_database
    checkpointer = _start(started, path, interval_s=0.001, idle_interval_s=0.01)
    _write_pages(writer, 20)  # a heartbeat's, say: not the receipt writer's

    await _until(
        lambda: checkpointer.last is not None and checkpointer.last.copied_frames > 20,
        "a pass that copied the unnoted writes",
    )


async def test_waiters_asking_together_share_one_pass(
    idle_checkpointer: tuple[WalCheckpointer, sqlite3.Connection],
) -> None:
    checkpointer, writer = idle_checkpointer
    _write_pages(writer, 5)

    await asyncio.gather(*(checkpointer.catch_up() for _ in range(5)))

    assert 1 <= checkpointer.passes <= 2


async def test_catch_up_returns_at_once_without_a_running_thread(
    wal_database: tuple[Path, sqlite3.Connection], started: list[WalCheckpointer]
) -> None:
    path, _writer = wal_database
    never_started = WalCheckpointer(
        path, interval_s=NEVER_S, long_pages=100, idle_interval_s=NEVER_S
    )
    await never_started.catch_up()
    await never_started.stop()

    stopped = _start(started, path)
    await stopped.stop()
    assert not stopped.running
    await stopped.catch_up()
    assert stopped.passes == 0


async def test_stop_ends_the_thread_while_a_waiter_is_released(
    wal_database: tuple[Path, sqlite3.Connection], started: list[WalCheckpointer]
) -> None:
    path, _writer = wal_database
    checkpointer = _start(started, path)
    waiting = asyncio.ensure_future(checkpointer.catch_up())
    await checkpointer.stop()
    await asyncio.wait_for(waiting, 10)
    assert not checkpointer.running


async def test_a_missing_database_is_reported_and_never_created(
    tmp_path: Path, started: list[WalCheckpointer], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "absent.db"
    with caplog.at_level(logging.WARNING, "toolloop.store.checkpoints"):
        checkpointer = _start(started, path)
        await checkpointer.catch_up()
        await checkpointer.stop()
    assert not path.exists()
    assert "WAL checkpointer not started" in caplog.text


async def test_a_database_not_in_wal_mode_ends_the_thread(
    tmp_path: Path, started: list[WalCheckpointer]
) -> None:
    path = tmp_path / "rollback-journal.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    connection.close()
    checkpointer = _start(started, path)

    await checkpointer.catch_up()
    await checkpointer.catch_up()  # released by the thread as it ends, or at once
    await _until(lambda: not checkpointer.running, "the thread ended")

    assert checkpointer.passes == 0
    assert not checkpointer.running


async def test_a_pass_that_finds_another_connection_checkpointing_is_survived(
    idle_checkpointer: tuple[WalCheckpointer, sqlite3.Connection],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # SQLite answers a pass that cannot take the checkpoint lock with (1, -1, -1),
    # the -1s it also gives for a database not in WAL mode; read as the latter, the
    # thread ended and commits checkpointed in the writer's transactions from then on.
    checkpointer, writer = idle_checkpointer
    path = tmp_path / "wal.db"
    _write_pages(writer, 20)
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other = sqlite3.connect(path, isolation_level=None, timeout=60, check_same_thread=False)
    probe = sqlite3.connect(path, isolation_level=None, timeout=0)
    full: asyncio.Future[tuple[int, int, int]] | None = None
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchone()  # a snapshot to wait for
        _write_pages(writer, 20)
        # A FULL checkpoint takes the lock, then waits for the reader's snapshot.
        full = asyncio.get_running_loop().run_in_executor(
            None, lambda: other.execute("PRAGMA wal_checkpoint(FULL)").fetchone()
        )
        # Probed sparingly: each probe takes the lock for a moment, and one taken
        # every few milliseconds could keep the FULL checkpoint from ever having it.
        for _ in range(200):  # a bound on the wait, not a timing assertion
            await asyncio.sleep(0.05)
            if probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone() == (1, -1, -1):
                break
        else:
            raise AssertionError("never: another connection holding the checkpoint lock")

        with caplog.at_level(logging.INFO, "toolloop.store.checkpoints"):
            await checkpointer.catch_up()

        assert checkpointer.busy_passes == 1
        assert "found another connection checkpointing (1 so far)" in caplog.text
        assert "not in WAL mode" not in caplog.text
        assert checkpointer.running
        assert not checkpointer.wal_is_long
        reader.execute("COMMIT")
        assert (await full)[0] == 0
        _write_pages(writer, 1)
        await checkpointer.catch_up()
        assert checkpointer.last is not None
        assert checkpointer.last.wal_frames == checkpointer.last.copied_frames >= 1
        assert checkpointer.running
    finally:
        # The FULL checkpoint ends once the reader's snapshot does: only then may its
        # connection close (closing it under a running statement would crash).
        if reader.in_transaction:
            reader.execute("COMMIT")
        if full is not None:
            await full
        for connection in (reader, other, probe):
            connection.close()


async def test_a_failing_pass_is_counted_logged_and_survived(
    tmp_path: Path, started: list[WalCheckpointer], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "not-a-database.db"
    path.write_bytes(b"this is not a SQLite database file, only bytes " * 100)
    with caplog.at_level(logging.WARNING, "toolloop.store.checkpoints"):
        checkpointer = _start(started, path)
        await checkpointer.catch_up()
        await checkpointer.catch_up()
    assert checkpointer.failures == 2
    assert checkpointer.running
    assert caplog.text.count("WAL checkpoint failed") == 1


class _FailingAfterOnePass:
    """A checkpointer connection whose passes fail after the first."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._passes = 0

    def execute(self, sql: str) -> sqlite3.Cursor:
        self._passes += 1
        if self._passes > 1:
            raise sqlite3.OperationalError("disk I/O error")
        return self._connection.execute(sql)

    def close(self) -> None:
        self._connection.close()


async def test_failing_passes_never_keep_the_writer_waiting(
    wal_database: tuple[Path, sqlite3.Connection],
    started: list[WalCheckpointer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, writer = wal_database
    connect = sqlite3.connect
    monkeypatch.setattr(
        checkpoints.sqlite3,
        "connect",
        lambda *args, **options: _FailingAfterOnePass(connect(*args, **options)),
    )
    _write_pages(writer, 200)
    # Passes every 10 ms with or without noted commits.
    checkpointer = _start(started, path, interval_s=0.01, long_pages=100, idle_interval_s=0.01)
    await _next_periodic_pass(checkpointer)
    assert checkpointer.wal_is_long

    await _until(lambda: checkpointer.failures >= 1, "a failed pass")

    assert not checkpointer.wal_is_long


def test_commits_checkpoint_themselves_past_twice_the_long_length(tmp_path: Path) -> None:
    checkpointer = WalCheckpointer(
        tmp_path / "x.db", interval_s=1, long_pages=600, idle_interval_s=1
    )
    assert checkpointer.commit_bound_pages == 1200


@pytest.mark.parametrize(
    ("interval_s", "long_pages", "idle_interval_s"), [(0, 10, 1), (1, 0, 1), (1, 10, 0)]
)
def test_intervals_and_length_must_be_positive(
    tmp_path: Path, interval_s: float, long_pages: int, idle_interval_s: float
) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        WalCheckpointer(
            tmp_path / "x.db",
            interval_s=interval_s,
            long_pages=long_pages,
            idle_interval_s=idle_interval_s,
        )
