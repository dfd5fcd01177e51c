"""HTTP metrics by route template and status class; the request id header."""

from __future__ import annotations

import uuid

import httpx

from app.api.auth.keyring import new_key, new_key_id
from app.foundation.redaction import redact_text
from tests.observability.metrics_reading import value
from tests.observability.registry import OWNER


async def test_requests_are_counted_by_route_template_not_raw_path(
    client: httpx.AsyncClient,
) -> None:
    template = {"method": "GET", "route": "/runs/{run_id}", "status_class": "4xx"}
    before = value("toolloop_http_requests_total", **template)
    raw_before = value(
        "toolloop_http_requests_total", method="GET", route="/runs/abc", status_class="4xx"
    )

    for _ in range(3):
        response = await client.get(f"/runs/{uuid.uuid4()}")
        assert response.status_code == 404

    assert value("toolloop_http_requests_total", **template) == before + 3
    assert value(
        "toolloop_http_requests_total", method="GET", route="/runs/abc", status_class="4xx"
    ) == (raw_before)
    assert (
        value("toolloop_http_request_duration_seconds_count", method="GET", route="/runs/{run_id}")
        >= 3
    )


async def test_unmatched_paths_and_odd_methods_share_one_label(client: httpx.AsyncClient) -> None:
    unmatched = value(
        "toolloop_http_requests_total", method="GET", route="unmatched", status_class="4xx"
    )
    odd = value(
        "toolloop_http_requests_total", method="other", route="unmatched", status_class="4xx"
    )

    await client.get(f"/no/such/{uuid.uuid4()}")
    await client.request("BREW", f"/pot/{uuid.uuid4()}")

    assert value(
        "toolloop_http_requests_total", method="GET", route="unmatched", status_class="4xx"
    ) == (unmatched + 1)
    assert value(
        "toolloop_http_requests_total", method="other", route="unmatched", status_class="4xx"
    ) == (odd + 1)


async def test_success_is_counted_as_2xx(client: httpx.AsyncClient) -> None:
    labels = {"method": "POST", "route": "/plans/sequential", "status_class": "2xx"}
    before = value("toolloop_http_requests_total", **labels)

    response = await client.post(
        "/plans/sequential",
        json={"owner": OWNER, "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}]},
    )

    assert response.status_code == 200
    assert value("toolloop_http_requests_total", **labels) == before + 1


async def test_a_request_id_is_minted_and_echoed(client: httpx.AsyncClient) -> None:
    first = await client.get("/healthz")
    second = await client.get("/healthz")

    assert first.headers["x-request-id"]
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_a_well_formed_incoming_request_id_is_kept(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz", headers={"X-Request-ID": "trace-42.a:b"})

    assert response.headers["x-request-id"] == "trace-42.a:b"


async def test_a_malformed_incoming_request_id_is_replaced(client: httpx.AsyncClient) -> None:
    for bad in ("has space", "x" * 200, "<script>", ""):
        response = await client.get("/healthz", headers={"X-Request-ID": bad})
        echoed = response.headers["x-request-id"]
        assert echoed != bad
        assert len(echoed) == 32


async def test_a_request_id_holding_a_secret_is_echoed_redacted(
    client: httpx.AsyncClient,
) -> None:
    key, _ = new_key(new_key_id())
    for sent in (key, f"req-{key}", "AKIAIOSFODNN7EXAMPLE"):
        response = await client.get("/healthz", headers={"X-Request-ID": sent})
        echoed = response.headers["x-request-id"]
        assert echoed == redact_text(sent)
        assert echoed != sent
        assert key not in echoed


async def test_errors_carry_the_request_id_too(client: httpx.AsyncClient) -> None:
    response = await client.get("/runs/x", headers={"X-Request-ID": "r-1"})

    assert response.status_code == 404
    assert response.headers["x-request-id"] == "r-1"
