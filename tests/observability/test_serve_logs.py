"""`toolloop serve` writes only JSON lines to stderr, uvicorn's own included."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import orjson

from tests.observability.conftest import EXAMPLE_REGISTRY
from tests.support.waiting import wait_for_sync

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-" + "serveSECRET0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_serving(base: str, process: subprocess.Popen[bytes]) -> None:
    def answering() -> bool:
        assert process.poll() is None, "toolloop serve exited"
        try:
            httpx.get(f"{base}/healthz", timeout=1)
        except httpx.TransportError:
            return False
        return True

    wait_for_sync(answering, "toolloop serve answers /healthz", every_s=0.1)


def test_serve_logs_json_lines_with_the_request_id(tmp_path: Path) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "TOOLLOOP_REGISTRIES": str(EXAMPLE_REGISTRY), "PYTHONPATH": str(REPO)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until_serving(base, process)
        answer = httpx.get(f"{base}/tools", headers={"X-Request-ID": "serve-1"}, timeout=5)
        httpx.get(f"{base}/runs/{SECRET}", timeout=5)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)

    assert answer.headers["x-request-id"] == "serve-1"
    lines = [orjson.loads(line) for line in stderr.decode().splitlines() if line.strip()]
    loggers = {line["logger"] for line in lines}
    assert {"uvicorn.error", "toolloop.http"} <= loggers
    request = next(line for line in lines if line.get("route") == "/tools")
    assert request["request_id"] == "serve-1"
    assert SECRET not in stderr.decode()
