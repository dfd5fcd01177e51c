"""The shipped Grafana dashboard, its provisioning, Prometheus config and compose services."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from app.observability.metrics import REGISTRY

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "toolloop.json"

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("_count", "_sum", "_created"),
}


def _exported_names() -> set[str]:
    return {
        family.name + suffix
        for family in REGISTRY.collect()
        for suffix in _SUFFIXES.get(family.type, ("",))
    }


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def _expressions(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for panel in _panels(dashboard) for t in panel.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"]]
    return exprs


def test_every_metric_the_dashboard_queries_exists() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {
        name
        for expr in _expressions(dashboard)
        for name in re.findall(r"\b(toolloop_[a-z0-9_]+)", expr)
    }

    assert queried, "the dashboard queries no metric"
    assert queried <= _exported_names(), sorted(queried - _exported_names())


def test_the_dashboard_covers_every_metric_family() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    text = " ".join(_expressions(dashboard))
    families = {family.name for family in REGISTRY.collect()}
    process = {name for name in families if name.startswith("toolloop_process_")}

    missing = {name for name in families - process if name not in text}

    assert not missing, sorted(missing)


def test_the_dashboard_is_well_formed_for_grafana() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = _panels(dashboard)
    ids = [panel["id"] for panel in panels]

    assert dashboard["uid"] == "toolloop-overview"
    assert len(ids) == len(set(ids))
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "toolloop-prometheus"}
        assert panel["targets"], panel["title"]
        assert all(t["expr"].count("(") == t["expr"].count(")") for t in panel["targets"])
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]


def test_the_histogram_panels_show_p50_p95_and_p99() -> None:
    text = DASHBOARD.read_text()

    for quantile in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({quantile}, sum by (le" in text


def test_grafana_provisioning_points_at_the_dashboard_and_the_datasource() -> None:
    provisioning = DEPLOY / "grafana" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    providers = yaml.safe_load((provisioning / "dashboards" / "toolloop.yml").read_text())

    assert datasources["datasources"][0]["uid"] == "toolloop-prometheus"
    assert datasources["datasources"][0]["url"] == "http://prometheus:9090"
    assert providers["providers"][0]["options"]["path"] == "/etc/grafana/dashboards"


def test_prometheus_scrapes_toolloop_with_a_bearer_token_file() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    job = config["scrape_configs"][0]

    assert job["static_configs"][0]["targets"] == ["toolloop:8000"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["credentials_file"].startswith("/etc/prometheus/secrets/")


def test_compose_runs_prometheus_and_grafana_on_loopback_with_the_files_mounted() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]

    assert prometheus["image"].startswith("prom/prometheus")
    assert grafana["image"].startswith("grafana/grafana")
    for service in (prometheus, grafana):
        assert all(port.startswith("127.0.0.1:") for port in service["ports"])
        for volume in service["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), source
            else:
                assert source in compose["volumes"], source
    mounts = " ".join(grafana["volumes"])
    assert "./deploy/grafana/dashboards:/etc/grafana/dashboards" in mounts
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning" in mounts
