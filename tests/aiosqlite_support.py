"""What is sent to aiosqlite's thread: for tests of what runs on the event loop's thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiosqlite
import pytest


def note_thread_calls(
    monkeypatch: pytest.MonkeyPatch, before: Callable[[str], None] | None = None
) -> list[str]:
    """From now on, the name of each function sent to aiosqlite's thread, in order
    (each still runs there); `before(name)`, given, runs first."""
    sent: list[str] = []
    send = aiosqlite.Connection._execute

    async def noted(self: aiosqlite.Connection, function: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(function, "__name__", repr(function))
        sent.append(name)
        if before is not None:
            before(name)
        return await send(self, function, *args, **kwargs)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(aiosqlite.Connection, "_execute", noted)
    return sent
