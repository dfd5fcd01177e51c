"""The benchmark's servers end with the benchmark run that started them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.live_server import assert_child_ends_with_killed_run

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
    assert_child_ends_with_killed_run(_RUN, str(tmp_path / "child.log"))
