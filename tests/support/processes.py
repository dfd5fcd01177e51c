"""A `toolloop` command (`serve`, `worker`) as a subprocess on 127.0.0.1, for the
tests that need a real process: started, waited for, stopped or killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bench.child_processes import ended_with_this_process
from tests.support.waiting import wait_for_sync


class ToolloopProcess:
    """`toolloop COMMAND ARGS` in its own process group, so that a test can kill -9 all
    of it; it ends with the test run that started it (`ended_with_this_process`)."""

    def __init__(
        self,
        workdir: Path,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        *,
        log_name: str,
        program: Sequence[str] = (sys.executable, "-m", "app.cli"),
    ) -> None:
        self.command = command
        self.log_path = workdir / log_name
        # A file, not a pipe: nobody drains a pipe, and a full one would block the process.
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [*program, command, *args],
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

    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        """Poll `ready` (bounded); raise with the process's log if it exited."""

        def check() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"toolloop {self.command} exited: {self.log()[-2000:]}")
            return ready()

        wait_for_sync(check, what, every_s=0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash would, and reap it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self._log.close()

    def stop(self) -> None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it does not end in time."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
