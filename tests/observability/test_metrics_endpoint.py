"""GET /metrics: Prometheus text, every name prefixed, guarded by metrics:read."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.settings import Settings
from tests.observability.conftest import bearer, serving
from tests.observability.registry import OWNER

EXPECTED_AFTER_A_PLAN = {
    "toolloop_calls",
    "toolloop_call_duration_seconds",
    "toolloop_call_admission_wait_seconds",
    "toolloop_calls_in_flight",
    "toolloop_plans",
    "toolloop_http_requests",
    "toolloop_http_request_duration_seconds",
    "toolloop_http_requests_in_flight",
    "toolloop_receipt_write_seconds",
    "toolloop_receipt_write_batch_size",
    "toolloop_audit_events",
}


async def _run_a_plan(client: httpx.AsyncClient, headers: dict[str, str] | None = None) -> None:
    response = await client.post(
        "/plans/sequential",
        json={"owner": OWNER, "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}]},
        headers=headers,
    )
    assert response.status_code == 200, response.text


async def test_every_metric_is_prefixed_and_the_plan_families_are_present(
    client: httpx.AsyncClient,
) -> None:
    await _run_a_plan(client)

    response = await client.get("/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {family.name for family in text_string_to_metric_families(response.text)}
    assert families, response.text
    assert all(name.startswith("toolloop_") for name in families), sorted(families)
    assert families >= EXPECTED_AFTER_A_PLAN, sorted(EXPECTED_AFTER_A_PLAN - families)


async def test_openmetrics_is_served_when_asked_for(client: httpx.AsyncClient) -> None:
    response = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


async def test_metrics_need_the_metrics_read_scope_when_keys_are_configured(
    registry_path: Path, sqlite_url: str, keys_path: Path
) -> None:
    reader = bearer(keys_path, "scraper", "metrics:read")
    planner = bearer(keys_path, "planner", "plans:execute")
    admin = bearer(keys_path, "operator", "admin")
    settings = Settings(registries=[registry_path], database_url=sqlite_url, api_keys=keys_path)

    async with serving(settings) as client:
        await _run_a_plan(client, planner)
        missing = await client.get("/metrics")
        wrong_scope = await client.get("/metrics", headers=planner)
        allowed = await client.get("/metrics", headers=reader)
        by_admin = await client.get("/metrics", headers=admin)

    assert missing.status_code == 401
    assert missing.headers["content-type"] == "application/problem+json"
    assert wrong_scope.status_code == 403
    assert allowed.status_code == 200
    assert "toolloop_calls_total" in allowed.text
    assert by_admin.status_code == 200


async def test_metrics_are_open_in_open_mode(client: httpx.AsyncClient) -> None:
    response = await client.get("/metrics")

    assert response.status_code == 200
