"""The test servers end with the test run that started them, however it ends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.live_server import REPO, assert_child_ends_with_killed_run

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
    assert_child_ends_with_killed_run(_RUN, str(tmp_path), str(EXAMPLE_REGISTRY))
