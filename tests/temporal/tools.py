"""Tools of the Temporal executor's tests: they run inside `toolloop worker` processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for


def echo(text: str, secret: str | None = None) -> dict[str, Any]:
    return {"text": text, "secret": secret}


def whoami(text: str) -> dict[str, Any]:
    """The text and the process the call ran in."""
    return {"text": text, "pid": os.getpid()}


def explode(text: str) -> dict[str, Any]:
    raise RuntimeError(f"exploded on {text}")


async def gate(marks: str, name: str) -> dict[str, Any]:
    """Mark that this attempt started (in which process), then wait until the test
    releases the gate: the test decides when the call ends, without a fixed sleep."""
    folder = Path(marks)
    (folder / f"{name}.started.{os.getpid()}").touch()
    release = folder / f"{name}.release"
    await wait_for(release.exists, f"the test released the gate {name}", bound_s=120, every_s=0.02)
    return {"name": name, "pid": os.getpid()}
