"""The benchmark's servers end with the benchmark run that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.live_server import has_ended

REPO = Path(__file__).resolve().parents[2]

# A stand-in for `python -m bench`: starts a long-lived child as the HTTP section
# starts its servers, says the child's pid, then waits to be killed.
_RUN = """
import sys, time
from pathlib import Path
from bench.http import _spawn
child = _spawn([sys.executable, "-c", "import time; time.sleep(600)"], Path(sys.argv[1]))
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)
def test_a_benchmark_server_ends_when_the_run_that_started_it_is_killed(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-c", _RUN, str(tmp_path / "child.log")],
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

        for _ in range(600):  # a bound on the wait, not a timing assertion
            if has_ended(child):
                break
            time.sleep(0.05)
        assert has_ended(child)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
        if child and not has_ended(child):
            os.kill(child, signal.SIGKILL)
        if run.stdout is not None:
            run.stdout.close()
