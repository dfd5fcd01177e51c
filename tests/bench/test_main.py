"""`python -m bench` stopped by SIGTERM (`make bench`'s `timeout`) still cleans up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.live_server import REPO

# A stand-in benchmark: says it started, then waits; its `finally` is what stops
# the real ones' servers and drops their scratch databases.
_RUN = """
import asyncio, sys
from pathlib import Path
from bench.__main__ import run_until_terminated

async def benchmarks() -> int:
    try:
        print("started", flush=True)
        await asyncio.sleep(600)
        return 0
    finally:
        Path(sys.argv[1]).write_text("cleaned up")

sys.exit(run_until_terminated(benchmarks()))
"""


def test_sigterm_runs_the_benchmarks_cleanup_and_exits_as_terminated(tmp_path: Path) -> None:
    marker = tmp_path / "cleanup"
    run = subprocess.Popen(
        [sys.executable, "-c", _RUN, str(marker)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stdout is not None
        assert run.stdout.readline() == "started\n"
        run.send_signal(signal.SIGTERM)
        _, errors = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=30)

    assert run.returncode == 128 + signal.SIGTERM
    assert marker.read_text() == "cleaned up"
    assert "stopped by SIGTERM" in errors
    assert "Traceback" not in errors


def test_a_run_that_ends_by_itself_returns_its_own_status() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from bench.__main__ import run_until_terminated\n"
            "async def benchmarks() -> int:\n"
            "    return 3\n"
            "sys.exit(run_until_terminated(benchmarks()))\n",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 3
    assert run.stderr == ""
