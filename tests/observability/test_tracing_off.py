"""Without an OTLP endpoint neither the OpenTelemetry SDK nor its exporter is imported,
and no tracing runs. (FastAPI imports the OpenTelemetry API itself whenever it is
installed, for its own telemetry layer, which the app turns off.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.observability.tracing import (
    TracingUnavailable,
    tracing_configured,
    tracing_from_environment,
)
from tests.observability.registry import write_registry

ROOT = Path(__file__).resolve().parents[2]

# Runs a plan through a fresh process's app, then names the OpenTelemetry modules loaded.
SCRIPT = """
import asyncio, sys
TRACING_MODULES = (
    "opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.proto",
    "app.observability.otel_tracing", "app.observability.traced_",
)
import httpx
from app.api.app import create_app
from app.settings import Settings

async def main(registry, database_url):
    app = create_app(Settings(registries=[registry], database_url=database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/plans/sequential", json={
                "owner": "obs-worker",
                "calls": [{"call_key": "a", "tool": "echo", "args": {"text": "x"}}],
            }, headers={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "succeeded"
    print(sorted(name for name in sys.modules if name.startswith(TRACING_MODULES)))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_a_plan_without_an_endpoint_imports_no_opentelemetry(tmp_path: Path) -> None:
    registry = write_registry(tmp_path)
    environment = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
    }
    finished = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(registry), f"sqlite+aiosqlite:///{tmp_path / 'db'}"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("environment", "configured"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
            False,
        ),
    ],
)
def test_tracing_is_configured_by_the_standard_variables(
    environment: dict[str, str], configured: bool
) -> None:
    assert tracing_configured(environment) is configured
    assert (tracing_from_environment(environment, payloads=False) is not None) is configured


def test_an_endpoint_without_the_sdk_installed_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [name for name in sys.modules if name.startswith("app.observability.otel")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)

    with pytest.raises(TracingUnavailable, match=r"pip install 'toolloop\[otel\]'"):
        tracing_from_environment(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, payloads=False
        )
