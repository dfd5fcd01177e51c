"""SQLite's group commits written by a process of their own.

In aiosqlite's thread, SQLite's inserts and the event loop take turns with
the GIL: each statement's step gives it up and takes it back, and the loop
runs Python in between (docs/benchmarks.md, section 4, twelfth round). A
process of its own has its own interpreter: the inserts and their commit run
on the other core while the loop goes on with the next requests, and the
loop's part of a batch is a pickle and two pipe operations.

The process is `app.store.sqlite_statements` run as a program, with its own
connection to the same database file and the same pragmas. It takes one
request at a time: a batch's statements, and whether to commit them. It ends
when its input closes (`aclose`), and ignores Ctrl-C, which reaches the
whole process group: the service writes what it still holds before it
closes the pipe.

A process that ended (killed, crashed) is started again by the next request.
A request that was in flight when it ended raises `WriterProcessGone`: its
transaction may or may not have committed, and the caller finds out by
reading (the group commit looks for the batch's first row, as after a
dropped connection). A request cancelled while in flight ends its process,
since the pipe could hold half a frame; SQLite rolls back what the process
had not committed.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.store import sqlite_statements
from app.store.sqlite_statements import SqliteClaims, SqliteStatement, frame

logger = logging.getLogger("toolloop.store")


class WriterProcessGone(Exception):
    """The writer process ended while a request was in flight, or could not start."""


class StatementFailed(Exception):
    """A statement failed in the writer process; its transaction was rolled back."""

    def __init__(self, statement: str, error: sqlite3.Error) -> None:
        super().__init__(f"{statement}: {error}")
        self.statement = statement
        self.error = error


def _error(name: str, code: int | None, message: str) -> sqlite3.Error:
    """The process's error as the sqlite3 exception it was, with its error code."""
    kind = getattr(sqlite3, name, None)
    if not (isinstance(kind, type) and issubclass(kind, sqlite3.Error)):
        kind = sqlite3.Error
    error = kind(message)
    if code is not None:
        error.sqlite_errorcode = code
    return error


class SqliteWriterProcess:
    def __init__(self, path: Path, pragmas: Sequence[str]) -> None:
        self._path = path
        self._pragmas = list(pragmas)
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self.commits = 0  # transactions the process committed
        self.started = 0  # processes started

    @property
    def pid(self) -> int | None:
        process = self._process
        return None if process is None or process.returncode is not None else process.pid

    async def start(self) -> None:
        """Start the process and check that it opened the database (an empty request)."""
        await self._request([], commit=False)

    async def execute(self, statements: Sequence[SqliteStatement]) -> None:
        """Run the statements in one transaction of the process and commit it there.
        Claims' `won` sets are filled in as `execute_all` fills them. Raises
        `StatementFailed` (rolled back) or `WriterProcessGone`."""
        await self._request(statements, commit=True)

    async def _request(self, statements: Sequence[SqliteStatement], *, commit: bool) -> None:
        payload = frame(pickle.dumps((statements, commit), pickle.HIGHEST_PROTOCOL))
        async with self._lock:
            process = await self._running()
            answered = False
            try:
                reply = await self._exchange(process, payload)
                answered = True
            finally:
                if not answered:
                    self._discard(process)
        if reply[0]:
            claims = [step for step in statements if isinstance(step, SqliteClaims)]
            for step, won in zip(claims, reply[1], strict=True):
                step.won.update(won)
            if commit:
                self.commits += 1
            return
        _, statement, name, code, message = reply
        raise StatementFailed(statement, _error(name, code, message))

    async def _running(self) -> asyncio.subprocess.Process:
        if self._closed:
            raise WriterProcessGone("the SQLite writer process is closed")
        process = self._process
        if process is not None and process.returncode is None:
            return process
        try:
            process = await asyncio.create_subprocess_exec(
                # -I -S: the standard library only; nothing from the environment.
                sys.executable,
                "-I",
                "-S",
                sqlite_statements.__file__,
                str(self._path),
                *self._pragmas,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise WriterProcessGone(f"the SQLite writer process did not start: {exc}") from exc
        self._process = process
        self.started += 1
        if self.started > 1:
            logger.warning("SQLite writer process started again (pid %d)", process.pid)
        return process

    async def _exchange(self, process: asyncio.subprocess.Process, payload: bytes) -> Any:
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None
        assert stdout is not None
        try:
            stdin.write(payload)
            await stdin.drain()
            header = await stdout.readexactly(sqlite_statements.FRAME_HEADER.size)
            (size,) = sqlite_statements.FRAME_HEADER.unpack(header)
            reply = pickle.loads(await stdout.readexactly(size))
        except (OSError, asyncio.IncompleteReadError) as exc:
            returncode = await _exit_status(process)
            reason = (
                f"it could not open {self._path}"
                if returncode == sqlite_statements.CANNOT_OPEN
                else f"exit status {returncode}"
            )
            raise WriterProcessGone(f"the SQLite writer process ended ({reason})") from exc
        return reply

    def _discard(self, process: asyncio.subprocess.Process) -> None:
        if process.returncode is None:
            process.kill()
        if self._process is process:
            self._process = None

    async def aclose(self) -> None:
        """Close the process's input and wait for it to end."""
        self._closed = True
        async with self._lock:
            process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        process.stdin.close()
        await process.wait()


async def _exit_status(process: asyncio.subprocess.Process) -> int | None:
    try:
        async with asyncio.timeout(1.0):
            return await process.wait()
    except TimeoutError:
        return None
