"""A real `toolloop serve` subprocess on 127.0.0.1, for tests that need real HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.processes import ToolloopProcess
from tests.support.waiting import wait_for_sync

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def has_ended(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie nobody reaped has ended too; Linux)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def assert_child_ends_with_killed_run(program: str, *args: str) -> None:
    """Run `python -c program ARGS` from the repository, a stand-in for a test or
    benchmark run that starts a child and prints the child's pid; SIGKILL the run
    alone, and assert that the child ends too (Linux)."""
    run = subprocess.Popen(
        [sys.executable, "-c", program, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    child = 0
    try:
        assert run.stdout is not None
        child = int(run.stdout.readline())
        assert not has_ended(child)

        run.kill()
        run.wait(timeout=30)

        wait_for_sync(lambda: has_ended(child), "the child ended with the killed run")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
        if child and not has_ended(child):
            os.kill(child, signal.SIGKILL)
        if run.stdout is not None:
            run.stdout.close()


class ServerProcess(ToolloopProcess):
    """`toolloop serve ARGS` (`ToolloopProcess`) on a port of its own."""

    def __init__(
        self,
        workdir: Path,
        args: list[str],
        env: Mapping[str, str] | None = None,
        *,
        log_name: str = "server.log",
        port: int | None = None,
        program: Sequence[str] = (sys.executable, "-m", "app.cli"),
    ) -> None:
        self.port = port if port is not None else free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        super().__init__(
            workdir,
            "serve",
            ["--port", str(self.port), *args],
            env or {},
            log_name=log_name,
            program=program,
        )

    def wait_until_answering(self) -> None:
        """Poll /healthz (bounded); raise with the server's log if it exited."""

        def answering() -> bool:
            try:
                httpx.get(f"{self.base}/healthz", timeout=1)
            except httpx.TransportError:
                return False
            return True

        self.wait_until(answering, "toolloop serve answers /healthz")


@contextmanager
def live_server(
    workdir: Path, args: list[str], env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Start `toolloop serve ARGS` and yield its base URL once /healthz answers."""
    server = ServerProcess(workdir, args, env)
    try:
        server.wait_until_answering()
        yield server.base
    finally:
        server.stop()
