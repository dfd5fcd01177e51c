"""A SQLite transaction's statements, run on one `sqlite3` connection.

The group commit's batch on SQLite is a list of statements
(`app.store.journal.sqlite.encoding` encodes its rows into them): run in
aiosqlite's thread, on the event loop's thread, or in the writer process
(`app.store.journal.sqlite.process`), which runs this file as its main program.
So it imports nothing but the standard library, and what crosses the pipe is
plain data: the requests hold tuples, lists, strings, numbers and
`SqliteClaims`, which the process's unpickler maps to its own copy of the class
and to nothing else.

The protocol, one request at a time: the parent writes a frame (an 8-byte
little-endian length, then a pickle of `(statements, commit)`), the process
runs it and answers with a frame holding `(True, [won run ids per claims
statement])` or `(False, failed statement, error class name, SQLite error
code, message)`. The process ends when its input closes.
"""

from __future__ import annotations

import io
import pickle
import signal
import sqlite3
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

FRAME_HEADER = struct.Struct("<Q")
CLAIM_STATEMENT = "claiming idempotency keys"
# The process's exit status when it cannot open the database.
CANNOT_OPEN = 3


@dataclass(frozen=True, slots=True)
class SqliteClaims:
    """Idempotency keys to claim, each with the run it inserts when claimed:
    `claim_sql` returns a row when it claimed the key; `insert_sql` inserts runs.
    The runs inserted are added to `won`."""

    keys: list[tuple[Any, ...]]
    runs: list[tuple[Any, ...]]
    run_ids: list[str]
    won: set[str]
    claim_sql: str
    insert_sql: str


SqliteStatement = tuple[str, list[tuple[Any, ...]]] | SqliteClaims


def execute_all(
    conn: sqlite3.Connection,
    statements: Sequence[SqliteStatement],
    failed: list[str],
    commit: bool,
) -> None:
    """Every statement, in order, in the connection's open transaction; then, with
    `commit`, the commit (or, on any failure, the rollback). `failed` names the
    statement running when one fails."""
    try:
        for statement in statements:
            if isinstance(statement, SqliteClaims):
                failed[:] = [CLAIM_STATEMENT]
                _claim_all(conn, statement)
                continue
            sql, rows = statement
            failed[:] = [sql]
            conn.executemany(sql, rows)
        if commit:
            failed[:] = ["COMMIT"]
            conn.commit()
    except BaseException:
        if commit:
            conn.rollback()
        raise


def _claim_all(conn: sqlite3.Connection, claims: SqliteClaims) -> None:
    # sqlite3's `executemany` takes no statement that returns rows: one upsert per key.
    inserted, won = [], []
    for key, run, run_id in zip(claims.keys, claims.runs, claims.run_ids, strict=True):
        if conn.execute(claims.claim_sql, key).fetchone() is not None:
            inserted.append(run)
            won.append(run_id)
    conn.executemany(claims.insert_sql, inserted)
    claims.won.update(won)


def read_frame(source: BinaryIO) -> bytes | None:
    """One frame's payload; None at the end of the input."""
    header = source.read(FRAME_HEADER.size)
    if len(header) < FRAME_HEADER.size:
        return None
    (size,) = FRAME_HEADER.unpack(header)
    payload = source.read(size)
    return payload if len(payload) == size else None


def frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload)) + payload


class _Requests(pickle.Unpickler):
    """Plain data and `SqliteClaims`, whichever module name the sender gave it."""

    def find_class(self, module: str, name: str) -> Any:
        if name == SqliteClaims.__name__ and module.endswith("sqlite.statements"):
            return SqliteClaims
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a writer request")


def _answer(conn: sqlite3.Connection, payload: bytes) -> tuple[Any, ...]:
    statements, commit = _Requests(io.BytesIO(payload)).load()
    failed: list[str] = []
    try:
        execute_all(conn, statements, failed, commit)
    except sqlite3.Error as exc:
        return (
            False,
            failed[0] if failed else "",
            type(exc).__name__,
            getattr(exc, "sqlite_errorcode", None),
            str(exc),
        )
    return True, [sorted(s.won) for s in statements if isinstance(s, SqliteClaims)]


def bind_none_as_is(value: None) -> None:
    """sqlite3's adapter for None (`app.store.database` registers it: see there)."""
    return value


def main(argv: Sequence[str]) -> int:
    """The writer process: `python statements.py DATABASE [PRAGMA ...]`."""
    path, *pragmas = argv
    # Ctrl-C reaches the whole process group: the service stops, and this process
    # ends once the service, having written what it still holds, closes its input.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # As `app.store.database` registers it: None binds as NULL without a lookup.
    sqlite3.register_adapter(type(None), bind_none_as_is)
    try:
        # mode=rw: the service created and migrated the file; never create another.
        uri = f"{Path(path).resolve().as_uri()}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        for pragma in pragmas:
            conn.execute(f"PRAGMA {pragma}")
    except sqlite3.Error as exc:
        print(f"toolloop SQLite writer: cannot open {path}: {exc}", file=sys.stderr)
        return CANNOT_OPEN
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    try:
        while (payload := read_frame(source)) is not None:
            sink.write(frame(pickle.dumps(_answer(conn, payload), pickle.HIGHEST_PROTOCOL)))
            sink.flush()
    except BrokenPipeError:
        pass  # the service is gone: nothing is waiting for an answer
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
