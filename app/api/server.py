"""The HTTP server of `toolloop serve`: uvicorn, told when a shutdown begins.

uvicorn stops accepting connections on SIGTERM, then waits for the open ones
to finish (up to its graceful-shutdown timeout) before the application's
lifespan ends. An event stream only finishes when its run ends, so the service
must end its runs and streams as soon as the shutdown begins, not in the
lifespan: `before_shutdown` runs then, beside uvicorn's wait.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable

import uvicorn

logger = logging.getLogger("toolloop.server")


class GracefulServer(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, before_shutdown: Callable[[], Awaitable[None]]
    ) -> None:
        super().__init__(config)
        self._before_shutdown = before_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        ending = asyncio.create_task(self._end_work(), name="toolloop-shutdown")
        try:
            await super().shutdown(sockets)
        finally:
            if not ending.done():
                ending.cancel()
            await asyncio.gather(ending, return_exceptions=True)

    async def _end_work(self) -> None:
        try:
            await self._before_shutdown()
        except Exception as exc:
            logger.error("ending runs and streams at shutdown failed: %s", exc, exc_info=exc)
