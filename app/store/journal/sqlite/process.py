"""SQLite's group commits written by a process of their own.

In aiosqlite's thread, SQLite's inserts and the event loop take turns with
the GIL: each statement's step gives it up and takes it back, and the loop
runs Python in between. A
process of its own has its own interpreter: the inserts and their commit run
on the other core while the loop goes on with the next requests, and the
loop's part of a batch is a pickle and two pipe operations.

The process is `app.store.journal.sqlite.statements` run as a program, with its own
connection to the same database file and the same pragmas. It takes one
request at a time: a batch's statements, and whether to commit them. It ends
when its input closes (`aclose`), and ignores Ctrl-C, which reaches the
whole process group: the service writes what it still holds before it
closes the pipe. How a process that ended is replaced, and what a request
in flight then raises: `app.store.journal.process`.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from app.store.journal.process import WriterProcess, WriterProcessGone
from app.store.journal.sqlite import statements as sqlite_statements
from app.store.journal.sqlite.statements import SqliteClaims, SqliteStatement

__all__ = ["SqliteWriterProcess", "StatementFailed", "WriterProcessGone"]


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


class SqliteWriterProcess(WriterProcess):
    name = "the SQLite writer process"

    def __init__(self, path: Path, pragmas: Sequence[str]) -> None:
        super().__init__()
        self._path = path
        self._pragmas = list(pragmas)

    def _command(self) -> Sequence[str]:
        # -I -S: the standard library only; nothing from the environment.
        return [
            sys.executable, "-I", "-S", sqlite_statements.__file__, str(self._path), *self._pragmas
        ]  # fmt: skip

    def _exit_reason(self, returncode: int | None) -> str:
        if returncode == sqlite_statements.CANNOT_OPEN:
            return f"it could not open {self._path}"
        return super()._exit_reason(returncode)

    async def start(self) -> None:
        """Start the process and check that it opened the database (an empty request)."""
        await self._execute([], commit=False)

    async def execute(self, statements: Sequence[SqliteStatement]) -> None:
        """Run the statements in one transaction of the process and commit it there.
        Claims' `won` sets are filled in as `execute_all` fills them. Raises
        `StatementFailed` (rolled back) or `WriterProcessGone`."""
        await self._execute(statements, commit=True)

    async def _execute(self, statements: Sequence[SqliteStatement], *, commit: bool) -> None:
        reply = await self._request((statements, commit))
        if reply[0]:
            claims = [step for step in statements if isinstance(step, SqliteClaims)]
            for step, won in zip(claims, reply[1], strict=True):
                step.won.update(won)
            if commit:
                self.commits += 1
            return
        _, statement, name, code, message = reply
        raise StatementFailed(statement, _error(name, code, message))
