"""`/mcp/{owner}` with API keys: 401 and 403 as HTTP answers before MCP, and the runs
an agent starts are its own, as any other."""

from __future__ import annotations

import httpx

from tests.api.mcp.conftest import Served
from tests.api.mcp.official_client import connected

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def _post(served: Served, key_name: str | None, owner: str = "desk") -> httpx.Response:
    return httpx.post(
        served.url(owner),
        json=LIST_TOOLS,
        headers={**ACCEPT, **served.headers(key_name)},
        timeout=30,
    )


def test_without_a_key_the_answer_is_401(keyed_server: Served) -> None:
    response = _post(keyed_server, None)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_an_unknown_owner_is_401_before_it_is_404(keyed_server: Served) -> None:
    assert _post(keyed_server, None, owner="nobody").status_code == 401
    assert _post(keyed_server, "agent", owner="nobody").status_code == 404


def test_a_wrong_key_is_401(keyed_server: Served) -> None:
    response = httpx.post(
        keyed_server.url(),
        json=LIST_TOOLS,
        headers={**ACCEPT, "Authorization": "Bearer tl_not-a-key"},
        timeout=30,
    )
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"


def test_a_key_without_plans_execute_is_403(keyed_server: Served) -> None:
    response = _post(keyed_server, "reader")
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    assert "plans:execute" in response.json()["detail"]


async def test_with_plans_execute_the_call_runs_as_the_keys_own_run(
    keyed_server: Served,
) -> None:
    async with connected(keyed_server.url(), headers=keyed_server.headers("agent")) as client:
        result = await client.call_tool("shout", {"text": "mine"})

    assert result.structured_content == {"text": "MINE"}
    assert result.meta is not None
    run_id = result.meta["toolloop/run_id"]
    run = keyed_server.get(f"/runs/{run_id}", "agent")
    assert run.status_code == 200
    assert (run.json()["kind"], run.json()["caller"]) == ("mcp", "agent")
    # Another key sees no such run, as with any run it did not start.
    assert keyed_server.get(f"/runs/{run_id}", "other-agent").status_code == 404
    cancel = keyed_server.post(f"/runs/{run_id}/cancel", "agent")
    assert cancel.status_code == 409  # its creator may control it; it has ended
