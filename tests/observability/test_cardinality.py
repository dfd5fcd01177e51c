"""Labels stay bounded: thousands of random keys, ids and names add no series."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.observability.metrics_reading import series
from tests.observability.registry import OWNER


def _key() -> str:
    return uuid.uuid4().hex


async def _traffic(client: httpx.AsyncClient, lanes: int, calls: int) -> None:
    """Every kind of request once, with fresh random keys, ids and names each time."""
    parallel = {
        "owner": OWNER,
        "max_concurrency": 64,
        "lanes": [
            {
                "item_key": _key(),
                "calls": [
                    {"call_key": _key(), "tool": "echo", "args": {"text": _key()}},
                    {"call_key": _key(), "tool": "cached_echo", "args": {"text": "same"}},
                ],
            }
            for _ in range(lanes)
        ],
    }
    sequential = {
        "owner": OWNER,
        "calls": [
            {"call_key": _key(), "tool": "echo", "args": {"text": _key()}} for _ in range(calls)
        ],
        "context": {"trace_id": _key()},
    }
    failing = {
        "owner": OWNER,
        "calls": [
            {"call_key": _key(), "tool": "leak", "args": {"text": _key()}},
            {"call_key": _key(), "tool": "echo", "args": {"text": _key()}},
        ],
    }
    rejected: list[dict[str, Any]] = [
        {"owner": _key(), "calls": [{"call_key": _key(), "tool": _key(), "args": {}}]},
        {"owner": OWNER, "calls": [{"call_key": _key(), "tool": _key(), "args": {}}]},
        {"owner": OWNER, "calls": [{"call_key": _key(), "tool": "echo", "args": {_key(): 1}}]},
    ]
    headers = {"X-Request-ID": _key()}
    for path, body in [
        ("/plans/parallel", parallel),
        ("/plans/sequential", sequential),
        ("/plans/sequential", failing),
    ]:
        response = await client.post(path, json=body, headers=headers)
        assert response.status_code == 200, response.text
    for body in rejected:
        response = await client.post("/plans/sequential", json=body, headers=headers)
        assert response.status_code == 422, response.text
    assert (await client.get(f"/runs/{_key()}", headers=headers)).status_code == 404
    assert (await client.get(f"/{_key()}/{_key()}", headers=headers)).status_code == 404
    assert (await client.request(_key()[:8].upper(), f"/{_key()}")).status_code in (404, 405)
    assert (await client.get("/metrics", params={_key(): _key()})).status_code == 200


async def test_thousands_of_random_keys_do_not_grow_the_series(
    client: httpx.AsyncClient,
) -> None:
    # Twice: the second round finds the first round's cache entries.
    await _traffic(client, lanes=3, calls=3)
    await _traffic(client, lanes=3, calls=3)
    warmed = series()

    await _traffic(client, lanes=2000, calls=1000)
    await _traffic(client, lanes=50, calls=50)

    grown = series() - warmed
    assert not grown, sorted(grown)[:20]
