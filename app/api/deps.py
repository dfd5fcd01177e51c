"""Request dependencies: the runtime built in the lifespan."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.service.errors import ServiceUnavailable
from app.service.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    """The runtime; a 503 problem while the service still waits for its database.

    A coroutine, so that FastAPI calls it on the event loop: a plain function
    would cost every request a hop to a worker thread and back."""
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        # What the database said is logged as it happens (`app.api.waiting`); a
        # response names neither where the database is nor what its driver said.
        raise ServiceUnavailable(
            "The service is waiting for its database; retry later.", retry_after_s=5
        )
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
