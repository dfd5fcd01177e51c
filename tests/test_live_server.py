"""The test servers end with the test run that started them, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.live_server import has_ended

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_REGISTRY = REPO / "registries" / "example.yml"

# A stand-in for a test run: starts a server, says its pid, then waits to be killed.
_RUN = """
import sys, time
from pathlib import Path
from tests.live_server import ServerProcess
server = ServerProcess(Path(sys.argv[1]), [], {"TOOLLOOP_REGISTRIES": sys.argv[2]})
server.wait_until_answering()
print(server.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)
def test_a_server_ends_when_the_run_that_started_it_is_killed(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-c", _RUN, str(tmp_path), str(EXAMPLE_REGISTRY)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    server_pid = 0
    try:
        assert run.stdout is not None
        server_pid = int(run.stdout.readline())
        assert not has_ended(server_pid)

        run.kill()
        run.wait(timeout=30)

        for _ in range(600):  # a bound on the wait, not a timing assertion
            if has_ended(server_pid):
                break
            time.sleep(0.05)
        assert has_ended(server_pid)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
        if server_pid and not has_ended(server_pid):
            os.kill(server_pid, signal.SIGKILL)
        if run.stdout is not None:
            run.stdout.close()
