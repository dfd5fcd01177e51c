"""One HTTP server process of `toolloop serve`: the whole service, or one of its workers."""

from __future__ import annotations

import socket
from contextlib import suppress
from typing import TYPE_CHECKING, cast

from app.contract import Contract
from app.settings import Settings

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from app.api.server import GracefulServer

# uvicorn's exit status when the application failed to start.
STARTUP_FAILURE = 3


class ServingFailed(Exception):
    """The server cannot start, or stopped because it could not: one line, for the operator."""


class ServiceServer:
    """The service's app behind uvicorn, ending its runs and streams when a shutdown begins.

    Raises `ServingFailed` when tracing is configured but cannot start."""

    def __init__(self, settings: Settings, contract: Contract) -> None:
        from app.api.app import create_app
        from app.api.server import GracefulServer
        from app.observability.tracing import TracingUnavailable

        try:
            self.app = create_app(settings, contract, tune_collector=True)
        except TracingUnavailable as exc:
            raise ServingFailed(f"refusing to start: {exc}") from exc
        self.server: GracefulServer = GracefulServer(
            server_config(self.app, settings), before_shutdown=self._end_runs_and_streams
        )
        self.app.state.stop_serving = lambda: setattr(self.server, "should_exit", True)

    async def _end_runs_and_streams(self) -> None:
        runtime = getattr(self.app.state, "runtime", None)
        if runtime is not None:
            await runtime.begin_shutdown()

    @property
    def started(self) -> bool:
        return self.server.started

    def run(self, sockets: list[socket.socket] | None = None) -> int:
        """Serve until stopped (on `sockets` when given, else the configured address).

        0 after a shutdown, STARTUP_FAILURE when it never started; raises
        `ServingFailed` when the service gave up at start (`wait_for_database_s` spent)."""
        with suppress(KeyboardInterrupt):
            self.server.run(sockets)
        failure = getattr(self.app.state, "startup_failure", None)
        if failure is not None:
            raise ServingFailed(failure)
        return 0 if self.server.started else STARTUP_FAILURE


def server_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    import uvicorn

    trusted = settings.forwarded_allow_ips
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        # The redacting handler stays; the middleware logs each request.
        log_config=None,
        access_log=False,
        # Proxy headers only from the proxies the operator names: uvicorn's own
        # default believes any client on 127.0.0.1, which could then pose as any
        # address (and reset its failed-key throttle) with a made-up X-Forwarded-For.
        proxy_headers=bool(trusted),
        forwarded_allow_ips=list(trusted),
        # uvicorn types it as int; it is only ever used as a timeout in seconds.
        timeout_graceful_shutdown=cast(int, settings.shutdown_grace_s),
    )
