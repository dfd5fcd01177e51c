"""What a trace needs of a supervised run (`app.service.runs.tasks.SupervisedRun`, which
sits above observability)."""

from __future__ import annotations

from typing import Any, Protocol


class SupervisedRunLike(Protocol):
    @property
    def run_id(self) -> str: ...

    async def execute(self) -> None: ...

    async def finish(self) -> Any: ...

    async def stop(self, status: str) -> Any: ...
