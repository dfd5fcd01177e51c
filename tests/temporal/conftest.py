"""A Temporal stack for the executor's tests: Temporal's dev server, a scratch
PostgreSQL database, `toolloop serve` with `TOOLLOOP_EXECUTOR=temporal` and
`toolloop worker` processes, all on 127.0.0.1. PostgreSQL only: serve and its
workers share one database, which the executor refuses to be an SQLite file."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _scratch_postgres_database
from tests.live_server import REPO, ServerProcess
from tests.support.fake_llm import FakeLLM, serve
from tests.support.temporal import WorkerProcess, require_temporal, temporal_dev_server
from tests.support.waiting import wait_for_sync
from tests.temporal.registry import write_registry

# A lost worker is noticed after this long without its heartbeat.
HEARTBEAT_TIMEOUT_S = 2
ENDED = ("succeeded", "failed", "cancelled", "interrupted")


@dataclass
class Stack:
    workdir: Path
    env: dict[str, str]
    marks: Path
    server: ServerProcess | None = None
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def base(self) -> str:
        assert self.server is not None
        return self.server.base

    def serve(self, *, wait: bool = True) -> ServerProcess:
        self.server = ServerProcess(
            self.workdir, [], self.env, log_name=f"server-{uuid.uuid4().hex[:6]}.log"
        )
        if wait:
            self.server.wait_until_answering()
        return self.server

    def start_worker(self, *, wait: bool = True) -> WorkerProcess:
        worker = WorkerProcess(self.workdir, [], self.env, name=f"worker-{uuid.uuid4().hex[:6]}")
        self.workers.append(worker)
        if wait:
            worker.wait_until_polling()
        return worker

    def post(self, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
        return httpx.post(f"{self.base}{path}", json=body, headers=headers, timeout=120)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", timeout=30)

    def ended_run(self, run_id: str) -> dict[str, Any]:
        def ended() -> dict[str, Any] | None:
            view: dict[str, Any] = self.get(f"/runs/{run_id}").json()
            return view if view["status"] in ENDED else None

        return wait_for_sync(ended, f"run {run_id} ended", bound_s=120, every_s=0.1)

    def receipts(self, run_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get(f"/runs/{run_id}/receipts?limit=100").json()["items"]
        return items

    def workflow_status(self, run_id: str) -> str:
        """The run's workflow's status in Temporal (`RUNNING`, `COMPLETED`, `CANCELED`...)."""
        from temporalio.client import Client

        from app.temporal.handles import workflow_id

        async def status() -> str:
            client = await Client.connect(self.env["TOOLLOOP_TEMPORAL_ADDRESS"])
            described = await client.get_workflow_handle(workflow_id(run_id)).describe()
            assert described.status is not None
            return described.status.name

        return asyncio.run(status())

    def workflow_events(self, run_id: str) -> list[Any]:
        """The run's workflow's history events (`temporalio.api.history.v1.HistoryEvent`)."""
        from temporalio.client import Client

        from app.temporal.handles import workflow_id

        async def events() -> list[Any]:
            client = await Client.connect(self.env["TOOLLOOP_TEMPORAL_ADDRESS"])
            history = await client.get_workflow_handle(workflow_id(run_id)).fetch_history()
            return list(history.events)

        return asyncio.run(events())

    def close(self) -> None:
        """SIGTERM every process first, then wait for each: their graceful stops overlap."""
        processes = [worker.process for worker in self.workers]
        if self.server is not None:
            processes.append(self.server.process)
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for worker in self.workers:
            worker.stop()
        if self.server is not None:
            self.server.stop()


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_temporal()
    with temporal_dev_server(tmp_path_factory.mktemp("temporal")) as address:
        yield address


@pytest.fixture(scope="module")
def module_postgres_url() -> Iterator[str]:
    yield from _scratch_postgres_database()


@pytest.fixture(scope="module")
def stack_env(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, module_postgres_url: str
) -> tuple[Path, dict[str, str]]:
    """The working folder and the environment every process of the module's stack shares
    (a task queue of its own)."""
    workdir = tmp_path_factory.mktemp("stack")
    return workdir, {
        "PYTHONPATH": str(REPO),
        "TOOLLOOP_REGISTRIES": str(write_registry(workdir)),
        "TOOLLOOP_DATABASE_URL": module_postgres_url,
        "TOOLLOOP_EXECUTOR": "temporal",
        "TOOLLOOP_TEMPORAL_ADDRESS": temporal_address,
        "TOOLLOOP_TEMPORAL_TASK_QUEUE": f"toolloop-test-{uuid.uuid4().hex[:8]}",
        "TOOLLOOP_TEMPORAL_HEARTBEAT_TIMEOUT_S": str(HEARTBEAT_TIMEOUT_S),
        "TOOLLOOP_LOG_FORMAT": "json",
    }


def open_stack(workdir: Path, env: dict[str, str], workers: int) -> Stack:
    marks = workdir / "marks"
    marks.mkdir(exist_ok=True)
    stack = Stack(workdir, env, marks)
    try:
        # Started together (their migrations take turns under an advisory lock).
        started = [stack.start_worker(wait=False) for _ in range(workers)]
        server = stack.serve(wait=False)
        for worker in started:
            worker.wait_until_polling()
        server.wait_until_answering()
    except BaseException:
        stack.close()
        raise
    return stack


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[FakeLLM, str]]:
    """The scripted model of a router module's tests, served on 127.0.0.1, and its URL."""
    fake = FakeLLM()
    with serve(fake) as base_url:
        yield fake, base_url


@pytest.fixture
def fake(model: tuple[FakeLLM, str]) -> Iterator[FakeLLM]:
    """The model for one test, which must ask for every reply it scripted."""
    fake = model[0]
    yield fake
    assert fake.remaining == 0, "the run did not ask for every scripted reply"
