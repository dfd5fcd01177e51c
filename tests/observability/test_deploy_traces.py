"""The compose file's OpenTelemetry Collector and the service pointed at it."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
COLLECTOR_CONFIG = REPO / "deploy" / "otel-collector" / "config.yml"


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    return services


def test_the_service_sends_its_spans_to_the_compose_collector_over_otlp_http() -> None:
    services = _services()
    endpoint = urlsplit(services["toolloop"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"])
    collector = services[endpoint.hostname or ""]
    assert collector["image"].startswith("otel/opentelemetry-collector")
    assert "otel-collector" in services["toolloop"]["depends_on"]

    config = yaml.safe_load(COLLECTOR_CONFIG.read_text())
    http_endpoint = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert http_endpoint.rsplit(":", 1)[1] == str(endpoint.port)
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert set(traces["exporters"]) <= set(config["exporters"])
    mounted = [volume.split(":")[0] for volume in collector["volumes"]]
    assert "./deploy/otel-collector/config.yml" in mounted
