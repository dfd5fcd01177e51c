"""PostgreSQL's group commits written by a process of their own.

On the event loop, a batch for PostgreSQL cost the loop its rows' encoding
(a JSON batch, written into one query as a literal), psycopg's machinery
for sending it, and a wait for the answer that came back only when the busy
loop next looked. Here
the loop's part is a pickle of driver tuples and two pipe operations; the
process (`app.store.journal.postgres.statements` run as a program, with a
connection of its own) writes each table's rows by binary `COPY` and talks
to the server on the other core, where its round trips wait for nobody.

The process takes one request at a time: a batch's operations, committed in
one transaction. Its connection string goes to it as its first frame. A
connection it lost is opened again by its next request; how a process that
ended is replaced: `app.store.journal.process`.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from typing import Any

import psycopg

from app.store.journal.postgres import statements as postgres_statements
from app.store.journal.process import WriterProcess, frame


class PostgresStatementFailed(Exception):
    """A statement failed in the writer process; its transaction was rolled back
    (`connection_lost`: with the process's connection, which its next request
    opens again)."""

    def __init__(self, statement: str, error: psycopg.Error, *, connection_lost: bool) -> None:
        super().__init__(f"{statement}: {error}")
        self.statement = statement
        self.error = error
        self.connection_lost = connection_lost


def _error(sqlstate: str | None, name: str, message: str) -> psycopg.Error:
    """The process's error as the psycopg exception it was: by its SQLSTATE, or by
    its class's name (an error of the client, which has none)."""
    if sqlstate:
        try:
            return psycopg.errors.lookup(sqlstate)(message)
        except KeyError:
            pass
    kind = getattr(psycopg, name, None)
    if not (isinstance(kind, type) and issubclass(kind, psycopg.Error)):
        kind = psycopg.OperationalError
    return kind(message)


class PostgresWriterProcess(WriterProcess):
    name = "the PostgreSQL writer process"

    def __init__(self, conninfo: str) -> None:
        super().__init__()
        self._conninfo = conninfo

    def _command(self) -> Sequence[str]:
        # -I: nothing from the environment or the working directory; psycopg
        # comes from this interpreter's site-packages.
        return [sys.executable, "-I", postgres_statements.__file__]

    def _greeting(self) -> bytes:
        return frame(pickle.dumps(self._conninfo, pickle.HIGHEST_PROTOCOL))

    async def start(self) -> None:
        """Start the process and check that it reaches the database."""
        await self._execute([], commit=False)

    async def execute(self, operations: Sequence[tuple[Any, ...]]) -> list[list[str]]:
        """Run the operations (`app.store.journal.postgres.statements`) in one transaction of
        the process and commit it there: the run ids each claim won. Raises
        `PostgresStatementFailed` (rolled back) or `WriterProcessGone`."""
        return await self._execute(operations, commit=True)

    async def _execute(
        self, operations: Sequence[tuple[Any, ...]], *, commit: bool
    ) -> list[list[str]]:
        reply = await self._request((operations, commit))
        if reply[0]:
            if commit:
                self.commits += 1
            won: list[list[str]] = reply[1]
            return won
        _, statement, sqlstate, name, message, lost = reply
        raise PostgresStatementFailed(
            statement, _error(sqlstate, name, message), connection_lost=lost
        )
