"""Several real `toolloop serve` processes on one PostgreSQL database.

Two ways to get them: K separate `serve` processes, each on its own port
(`replicas`: what several hosts do), or one `serve --workers N`, whose workers
share one port (`workers`). Either way every process is a whole service with
its own row in `service_instances`, which is how a test tells them apart and
knows they are up. Stop them, or kill -9 one, through the objects yielded.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from tests.live_server import ServerProcess, has_ended
from tests.support.waiting import wait_for_sync

# A worker of `serve --workers N` is a child of the supervisor started by multiprocessing.
_WORKER_MARK = b"multiprocessing.spawn"


def serve_env(database_url: str, registries: Sequence[Path], **settings: str) -> dict[str, str]:
    """`toolloop serve`'s environment: the registries, the database, quiet logs, this
    checkout importable, and each of `settings` as `TOOLLOOP_<NAME>` (e.g.
    `instance_stale_after_s="3"`)."""
    repo = Path(__file__).resolve().parents[2]
    return {
        "TOOLLOOP_REGISTRIES": ",".join(str(path) for path in registries),
        "TOOLLOOP_DATABASE_URL": database_url,
        "TOOLLOOP_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(repo),
        **{f"TOOLLOOP_{name.upper()}": value for name, value in settings.items()},
    }


def fetch(database_url: str, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
    """The rows of one query on the PostgreSQL database the processes share."""
    conninfo = make_url(database_url).set(drivername="postgresql")
    with psycopg.connect(conninfo.render_as_string(hide_password=False)) as connection:
        return list(connection.execute(sql, params).fetchall())


def instance_pids(database_url: str) -> set[int]:
    """The pids of the service processes registered in the database now."""
    return {int(str(pid)) for (pid,) in fetch(database_url, "SELECT pid FROM service_instances")}


def run_instance_pid(database_url: str, run_id: str) -> int | None:
    """The pid of the process that runs `run_id`, while its instance row lasts."""
    rows = fetch(
        database_url,
        "SELECT i.pid FROM runs r JOIN service_instances i ON i.id = r.instance_id WHERE r.id = %s",
        (run_id,),
    )
    return int(str(rows[0][0])) if rows else None


@contextmanager
def replicas(
    workdir: Path, count: int, env: Mapping[str, str], args: Sequence[str] = ()
) -> Iterator[list[ServerProcess]]:
    """`count` separate `toolloop serve ARGS` processes, each on a port of its own,
    yielded once every one answers; each is stopped (SIGTERM) at the end."""
    with ExitStack() as stack:
        servers = []
        for index in range(count):
            server = ServerProcess(workdir, list(args), env, log_name=f"replica-{index}.log")
            stack.callback(server.stop)
            servers.append(server)
        for server in servers:
            server.wait_until_answering()
        yield servers


class Workers:
    """One `toolloop serve --workers N`: the supervisor and its workers."""

    def __init__(self, server: ServerProcess, database_url: str) -> None:
        self.server = server
        self.base = server.base
        self.database_url = database_url

    def worker_pids(self) -> set[int]:
        """The supervisor's live worker processes (Linux: /proc)."""
        supervisor = self.server.process.pid
        pids = set()
        for task in Path(f"/proc/{supervisor}/task").iterdir():
            for child in (task / "children").read_text().split():
                pid = int(child)
                try:
                    command = Path(f"/proc/{pid}/cmdline").read_bytes()
                except FileNotFoundError:
                    continue
                if _WORKER_MARK in command and not has_ended(pid):
                    pids.add(pid)
        return pids

    def wait_until_serving(self, count: int) -> set[int]:
        """Wait until `count` workers run and each is registered (its service opened);
        their pids."""

        def serving() -> set[int]:
            if self.server.process.poll() is not None:
                raise RuntimeError(f"toolloop serve exited: {self.server.log()[-2000:]}")
            pids = self.worker_pids()
            ready = len(pids) == count and pids <= instance_pids(self.database_url)
            return pids if ready else set()

        self.server.wait_until_answering()
        return wait_for_sync(serving, f"{count} workers serving", every_s=0.1)

    def kill_worker(self, pid: int) -> None:
        """kill -9 one worker, as a crash would."""
        assert pid in self.worker_pids(), f"{pid} is not a worker of this server"
        os.kill(pid, signal.SIGKILL)
        wait_for_sync(lambda: has_ended(pid), f"worker {pid} ended")

    def terminate(self, signal_number: int = signal.SIGTERM) -> int:
        """Signal the supervisor (SIGTERM or SIGINT: a graceful shutdown of every worker);
        its exit status."""
        self.server.process.send_signal(signal_number)
        return self.server.process.wait(timeout=60)


@contextmanager
def workers(
    workdir: Path,
    count: int,
    env: Mapping[str, str],
    args: Sequence[str] = (),
) -> Iterator[Workers]:
    """`toolloop serve --workers COUNT ARGS` on the PostgreSQL database of `env`, yielded
    once every worker serves; stopped at the end (SIGTERM, then SIGKILL of the group)."""
    server = ServerProcess(workdir, ["--workers", str(count), *args], env, log_name="workers.log")
    try:
        group = Workers(server, env["TOOLLOOP_DATABASE_URL"])
        group.wait_until_serving(count)
        yield group
    finally:
        server.stop()
