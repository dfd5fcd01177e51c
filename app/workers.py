"""`toolloop serve --workers N`: N server processes on one port, kept by uvicorn's supervisor.

The supervisor (this process) binds the port, starts N workers that share the
socket, pings them, and replaces one that dies or hangs. Each worker is a
whole service (`app.serving.ServiceServer`): its own instance id, heartbeat,
writer process, and runs. uvicorn's `Process` would serve a `uvicorn.Server`
built from the supervisor's config; a worker here builds the service's own
server instead (registries loaded, logging configured, runs and streams ended
when its shutdown begins), as a single-process `toolloop serve` does.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socket import socket

import uvicorn
from prometheus_client.multiprocess import mark_process_dead
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from app.serving import STARTUP_FAILURE, ServiceServer, ServingFailed
from app.settings import Settings

logger = logging.getLogger("toolloop.workers")

METRICS_DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# How long a worker may take to answer the supervisor's ping before it is judged hung
# and replaced. A new worker answers once Python has imported the service's modules,
# which takes seconds on a busy host (uvicorn's 5 s killed workers still starting); a
# worker that died is seen at once, whatever this is.
WORKER_HEALTHCHECK_S = 30


def serve_workers(settings: Settings) -> int:
    """Serve with `settings.workers` processes until SIGTERM or SIGINT; the exit status.

    The caller migrates the database first (unless serving is to wait for it), so that
    the workers find it at the head."""
    with metrics_directory() as directory:
        # The workers build their app themselves (`WorkerProcess.target`); this config
        # gives the supervisor the address, the worker count and the health-check timing.
        config = uvicorn.Config(
            "app.api.app:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_config=None,
            timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
        )
        listening = config.bind_socket()
        try:
            supervisor = WorkerSupervisor(config, [listening], settings, directory)
            supervisor.run()
        finally:
            listening.close()
    return STARTUP_FAILURE if supervisor.failed_to_start else 0


@contextmanager
def metrics_directory() -> Iterator[str]:
    """Where every worker writes its metrics for `/metrics` to merge: the operator's
    `PROMETHEUS_MULTIPROC_DIR`, else a fresh private directory, removed at the end."""
    chosen = os.environ.get(METRICS_DIRECTORY_VARIABLE)
    if chosen:
        yield chosen
        return
    directory = tempfile.mkdtemp(prefix="toolloop-metrics-")
    os.environ[METRICS_DIRECTORY_VARIABLE] = directory  # the workers inherit it
    try:
        yield directory
    finally:
        del os.environ[METRICS_DIRECTORY_VARIABLE]
        shutil.rmtree(directory, ignore_errors=True)


class WorkerProcess(Process):
    """One worker: the service's server, serving the supervisor's socket."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket], settings: Settings) -> None:
        self.settings = settings
        self.supervisor_pid = os.getpid()
        self._service: ServiceServer | None = None
        super().__init__(config, sockets)

    def pong(self) -> None:
        self.child_conn.recv()
        self.child_conn.send(self._service is not None and self._service.started)

    def target(self, sockets: list[socket] | None = None) -> None:  # pragma: no cover (a child)
        end_with_parent(self.supervisor_pid)
        # Answers the supervisor's pings from the start: loading the registries takes time.
        threading.Thread(target=self.always_pong, daemon=True).start()
        sys.exit(self._serve(sockets))

    def _serve(self, sockets: list[socket] | None) -> int:  # pragma: no cover (a child)
        from app.contract import RegistryError, load_contract
        from app.observability.logging import configure_logging

        settings = self.settings
        try:
            contract = load_contract(settings.registries, settings.allowed_modules)
        except RegistryError as exc:  # changed since the supervisor checked it
            print(f"toolloop: worker {os.getpid()}: {exc}", file=sys.stderr)
            return STARTUP_FAILURE
        configure_logging(settings.log_level, settings.log_format)
        try:
            self._service = ServiceServer(settings, contract)
            return self._service.run(sockets)
        except ServingFailed as exc:
            print(f"toolloop: worker {os.getpid()}: {exc}", file=sys.stderr)
            return STARTUP_FAILURE


class WorkerSupervisor(Multiprocess):
    """uvicorn's supervisor with `WorkerProcess` workers; a dead worker's live gauges
    (in-flight counts) leave `/metrics`, and one that never started stops them all."""

    def __init__(
        self,
        config: uvicorn.Config,
        sockets: list[socket],
        settings: Settings,
        metrics_directory: str,
    ) -> None:
        super().__init__(config, sockets)
        self.settings = settings
        self.metrics_directory = metrics_directory
        self.failed_to_start = False

    def init_processes(self) -> None:
        for _ in range(self.processes_num):
            self.processes.append(self._start_worker())

    def _start_worker(self) -> WorkerProcess:
        process = WorkerProcess(self.config, self.sockets, self.settings)
        process.start()
        return process

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()  # it may be hung rather than dead
            process.join()
            if process.pid is not None:
                mark_process_dead(process.pid, self.metrics_directory)  # type: ignore[no-untyped-call]
            if process.exitcode == STARTUP_FAILURE:
                # Its replacement would fail the same way (registries, tracing, database).
                logger.error("worker %s failed to start; stopping every worker", process.pid)
                self.failed_to_start = True
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            logger.warning(
                "worker %s ended (exit status %s); starting another", process.pid, process.exitcode
            )
            self.processes[index] = self._start_worker()

    # uvicorn's SIGHUP, SIGTTIN and SIGTTOU handlers would start plain uvicorn workers.
    def handle_hup(self) -> None:
        self._ignored("SIGHUP")

    def handle_ttin(self) -> None:
        self._ignored("SIGTTIN")

    def handle_ttou(self) -> None:
        self._ignored("SIGTTOU")

    def _ignored(self, name: str) -> None:
        logger.warning(
            "%s ignored: the service keeps its %d workers; restart it to change them",
            name,
            self.processes_num,
        )


def end_with_parent(parent_pid: int) -> None:
    """On Linux, have this process sent SIGTERM (a graceful shutdown) once its parent
    is gone, however it ended: a supervisor killed with -9 leaves no worker behind."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent ended before the request took
        os.kill(os.getpid(), signal.SIGTERM)
