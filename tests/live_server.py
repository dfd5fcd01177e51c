"""A real `toolloop serve` subprocess on 127.0.0.1, for tests that need real HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def live_server(
    workdir: Path, args: list[str], env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Start `toolloop serve ARGS` and yield its base URL once /healthz answers."""
    port = free_port()
    # A file, not a pipe: nobody drains a pipe, and a full one would block the server.
    log = (workdir / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), *args],
        cwd=workdir,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if process.poll() is not None:
                break
            try:
                httpx.get(f"{base}/healthz", timeout=1)
            except httpx.TransportError:
                time.sleep(0.1)
                continue
            break
        else:
            raise RuntimeError("toolloop serve did not answer within the bound")
        if process.poll() is not None:
            output = (workdir / "server.log").read_text(errors="replace")
            raise RuntimeError(f"toolloop serve exited: {output[-2000:]}")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()
