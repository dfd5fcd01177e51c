"""The Temporal benchmark's two sides: their worker processes run what it times, and end
with it."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from temporalio.client import Client

from app.store.migrate import upgrade_database
from bench import temporal
from bench.temporal_server import TemporalDevServer


def _bare_workers(address: str) -> list[int]:
    """Pids of the bare worker processes connected to `address` (Linux's /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, NotADirectoryError, PermissionError, ProcessLookupError):
            continue
        if b"bench.temporal_bare" in arguments and address.encode() in arguments:
            found.append(int(entry.name))
    return found


async def test_the_bare_side_runs_its_calls_and_lanes_on_two_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(temporal, "RUNS", 2)
    monkeypatch.setattr(temporal, "CALLS", 3)
    monkeypatch.setattr(temporal, "LANES", 7)
    with TemporalDevServer() as server:
        client = await Client.connect(server.address, namespace=server.namespace)
        async with AsyncExitStack() as stack:
            measures = await temporal._bare_side(stack, server, client, tmp_path)
            assert len(_bare_workers(server.address)) == temporal.WORKERS
            # Each asserts its workflows' answers: every call and every lane ran.
            assert set(measures) == set(temporal._comparisons())
            for measure in measures.values():
                assert await measure() > 0
        assert _bare_workers(server.address) == []


async def test_the_toolloop_side_runs_its_plans_on_two_toolloop_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.setattr(temporal, "RUNS", 2)
    monkeypatch.setattr(temporal, "CALLS", 3)
    monkeypatch.setattr(temporal, "LANES", 7)
    await upgrade_database(postgres_url)
    with TemporalDevServer() as server:
        client = await Client.connect(server.address, namespace=server.namespace)
        async with AsyncExitStack() as stack:
            measures = await temporal._toolloop_side(stack, server, client, tmp_path, postgres_url)
            assert set(measures) == set(temporal._comparisons())
            # Each asserts every plan's answer: 200 and `succeeded`.
            for measure in measures.values():
                assert await measure() > 0
