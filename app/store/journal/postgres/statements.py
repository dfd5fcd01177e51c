"""A PostgreSQL transaction's statements, run by the writer process.

The group commit's batch on PostgreSQL, written by a process of its own
(`app.store.journal.postgres.process`), which runs this file as its main program: the
event loop's part of a batch is a pickle of driver tuples and two pipe
operations, and the rows' `COPY` format, the statements and every exchange
with the server happen here, on the other core. So it imports nothing but the
standard library and psycopg, and what crosses the pipe is plain data: tuples,
lists, strings, numbers and datetimes, which the process's unpickler maps to
nothing else.

The protocol, one request at a time: the parent writes a frame (an 8-byte
little-endian length, then a pickle). The first frame is the connection
string, not answered; every later one is `(operations, commit)`, run in one
transaction (rolled back instead without `commit`) and answered with `(True,
[won run ids per claim])` or `(False, statement, SQLSTATE, error class name,
message, connection lost)`. No operations and no commit: a check that the
process can reach the database. An operation is one of:

- `("copy", COPY statement, column types, rows)`: a table's rows, by binary
  `COPY`;
- `("many", statement, rows)`: the statement once per row;
- `("claim", statement, rows)`: the statement once per row, returning the ids
  of the runs it inserted (idempotency keys' claims).

A lost connection is opened again by the next request. The process ends when
its input closes.
"""

from __future__ import annotations

import io
import pickle
import signal
import struct
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, BinaryIO

import psycopg

FRAME_HEADER = struct.Struct("<Q")
CLAIM = "claim"
COPY = "copy"
MANY = "many"

_ALLOWED = {
    ("datetime", "datetime"): datetime,
    ("datetime", "timezone"): timezone,
    ("datetime", "timedelta"): timedelta,
}


class _Requests(pickle.Unpickler):
    """Plain data and datetimes only."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED.get((module, name))
        if allowed is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a writer request")
        return allowed


def execute_all(
    conn: psycopg.Connection[Any],
    operations: Sequence[tuple[Any, ...]],
    failed: list[str],
    commit: bool,
) -> list[list[str]]:
    """Every operation, in order, in one transaction, committed with `commit` (and
    rolled back on any failure); the run ids each claim won. `failed` names the
    statement running when one fails (in a pipeline, every statement it holds: its
    error comes when it syncs, with no word of which statement failed).

    Statements go in pipelines, each a round trip however many it holds, and
    each table's rows by binary `COPY` between them: two round trips, cheap
    here, where nothing else waits for the answers, and far less of the
    server's time per row than inserts."""
    segments = _segments(operations)
    last = len(segments) - 1
    claims: list[psycopg.Cursor[Any]] = []
    try:
        with conn.cursor() as cursor:
            for index, segment in enumerate(segments):
                if isinstance(segment, tuple):
                    _, statement, types, rows = segment
                    failed[:] = [statement]
                    with cursor.copy(statement) as copy:
                        copy.set_types(types)
                        for row in rows:
                            copy.write_row(row)
                    continue
                with conn.pipeline():
                    end = ("COMMIT" if commit else "ROLLBACK") if index == last else None
                    _pipelined(conn, cursor, segment, claims, failed, first=index == 0, end=end)
        return [_returned(claim) for claim in claims]
    except BaseException:
        if not conn.broken:
            conn.rollback()
        raise
    finally:
        for claim in claims:
            claim.close()


def _pipelined(
    conn: psycopg.Connection[Any],
    cursor: psycopg.Cursor[Any],
    segment: Sequence[tuple[Any, ...]],
    claims: list[psycopg.Cursor[Any]],
    failed: list[str],
    *,
    first: bool,
    end: str | None,
) -> None:
    """Send the segment's statements, after BEGIN for the `first`, before `end`; `failed`
    names those sent. A claim's statements go through a cursor of their own (added
    to `claims`), whose results are read once the pipeline has synced."""
    sent: list[str] = []

    def send(statement: str) -> None:
        sent.append(statement)
        failed[:] = ["; ".join(dict.fromkeys(sent))]

    if first:
        send("BEGIN")
        cursor.execute("BEGIN")
    for operation in segment:
        kind = operation[0]
        if kind in (MANY, CLAIM):
            _, statement, rows = operation
        else:
            raise ValueError(f"unknown operation {kind!r}")
        send(statement)
        if kind == CLAIM:
            claim = conn.cursor()
            claims.append(claim)
            claim.executemany(statement, rows, returning=True)
        else:
            cursor.executemany(statement, rows)
    if end is not None:
        send(end)
        cursor.execute(end)


Segment = list[tuple[Any, ...]] | tuple[Any, ...]


def _segments(operations: Sequence[tuple[Any, ...]]) -> list[Segment]:
    """The operations in order: runs of pipelined ones, each `COPY` on its own; the
    first and the last a pipeline (they hold BEGIN and COMMIT)."""
    segments: list[Segment] = [[]]
    for operation in operations:
        if operation[0] == COPY:
            segments.append(operation)
            continue
        pipeline = segments[-1]
        if isinstance(pipeline, list):
            pipeline.append(operation)
        else:
            segments.append([operation])
    if not isinstance(segments[-1], list):
        segments.append([])
    return segments


def _returned(claim: psycopg.Cursor[Any]) -> list[str]:
    """The first column of each row the claim's statements returned."""
    returned: list[str] = []
    while True:
        returned.extend(row[0] for row in claim.fetchall())
        if not claim.nextset():
            return returned


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


def load(payload: bytes) -> Any:
    """A request's content: plain data and datetimes only."""
    return _Requests(io.BytesIO(payload)).load()


class _Writer:
    """The process's connection, opened when a request finds none."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._conn: psycopg.Connection[Any] | None = None

    def answer(self, operations: Sequence[tuple[Any, ...]], commit: bool) -> tuple[Any, ...]:
        failed: list[str] = []
        try:
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                failed[:] = ["connect"]
                self.close()
                conn = self._conn = psycopg.connect(self._conninfo, autocommit=True)
            return True, execute_all(conn, operations, failed, commit)
        except psycopg.Error as exc:
            conn = self._conn
            lost = conn is None or conn.closed or conn.broken
            if lost:
                self.close()
            return (
                False,
                failed[0] if failed else "",
                exc.sqlstate,
                type(exc).__name__,
                str(exc),
                lost,
            )

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def main(argv: Sequence[str]) -> int:
    """The writer process: `python statements.py`; its first frame is the
    connection string (not an argument: `ps` shows those to everyone)."""
    # Ctrl-C reaches the whole process group: the service stops, and this process
    # ends once the service, having written what it still holds, closes its input.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    first = read_frame(source)
    if first is None:
        return 0
    writer = _Writer(load(first))
    try:
        while (payload := read_frame(source)) is not None:
            operations, commit = load(payload)
            reply = writer.answer(operations, commit)
            sink.write(frame(pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)))
            sink.flush()
    except BrokenPipeError:
        pass  # the service is gone: nothing is waiting for an answer
    finally:
        writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
