"""A group commit's writer process, as its parent sees it.

Each database's writer process is a program of its own that answers framed
requests one at a time on its standard input and output (an 8-byte
little-endian length, then a pickle): `app.store.journal.sqlite.statements` for
SQLite files, `app.store.journal.postgres.statements` for PostgreSQL. Here is what
both parents share: starting the process, one request at a time, noticing
that it ended, and closing it.

A process that ended (killed, crashed) is started again by the next request.
A request that was in flight when it ended raises `WriterProcessGone`: its
transaction may or may not have committed, and the caller finds out by
reading (the group commit looks for the batch's first row, as after a
dropped connection). A request cancelled while in flight ends its process,
since the pipe could hold half a frame; the database rolls back what the
process had not committed.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import struct
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger("toolloop.store")

# The frame header both writer programs read and write (each keeps its own copy:
# they import nothing of the service).
FRAME_HEADER = struct.Struct("<Q")


def frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload)) + payload


class WriterProcessGone(Exception):
    """The writer process ended while a request was in flight, or could not start."""


class WriterProcess:
    """One writer program's process, started when first needed."""

    # For messages: "the SQLite writer process", ...
    name = "the writer process"

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self.commits = 0  # transactions the process committed
        self.started = 0  # processes started

    @property
    def pid(self) -> int | None:
        process = self._process
        return None if process is None or process.returncode is not None else process.pid

    def _command(self) -> Sequence[str]:
        """The program and its arguments."""
        raise NotImplementedError

    def _greeting(self) -> bytes | None:
        """A frame written to each new process before its first request (not answered)."""
        return None

    def _exit_reason(self, returncode: int | None) -> str:
        return f"exit status {returncode}"

    async def _request(self, request: Any) -> Any:
        """The process's answer to `request` (pickled), one request at a time."""
        payload = frame(pickle.dumps(request, pickle.HIGHEST_PROTOCOL))
        async with self._lock:
            process = await self._running()
            answered = False
            try:
                reply = await self._exchange(process, payload)
                answered = True
            finally:
                if not answered:
                    self._discard(process)
        return reply

    async def _running(self) -> asyncio.subprocess.Process:
        if self._closed:
            raise WriterProcessGone(f"{self.name} is closed")
        process = self._process
        if process is not None and process.returncode is None:
            return process
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise WriterProcessGone(f"{self.name} did not start: {exc}") from exc
        greeting = self._greeting()
        if greeting is not None:
            assert process.stdin is not None
            process.stdin.write(greeting)  # drained with the first request
        self._process = process
        self.started += 1
        if self.started > 1:
            logger.warning("%s started again (pid %d)", self.name.capitalize(), process.pid)
        return process

    async def _exchange(self, process: asyncio.subprocess.Process, payload: bytes) -> Any:
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None
        assert stdout is not None
        try:
            stdin.write(payload)
            await stdin.drain()
            header = await stdout.readexactly(FRAME_HEADER.size)
            (size,) = FRAME_HEADER.unpack(header)
            reply = pickle.loads(await stdout.readexactly(size))
        except (OSError, asyncio.IncompleteReadError) as exc:
            reason = self._exit_reason(await _exit_status(process))
            raise WriterProcessGone(f"{self.name} ended ({reason})") from exc
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
