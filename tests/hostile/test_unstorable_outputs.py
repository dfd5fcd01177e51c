"""A tool whose output or error no database can store (U+0000, a lone surrogate): the
call fails with a receipt that says why, stored and answered, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.hostile import unstorable_tools
from tests.hostile.unstorable_registry import REGISTRY
from tests.support.app import AppFactory


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


@pytest.fixture(autouse=True)
def _fresh_tools() -> None:
    unstorable_tools.reset()


def _call(call_key: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"call_key": call_key, "tool": tool, "args": args}


async def _stored(
    client: httpx.AsyncClient, run_id: str, answered: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The run's stored receipts, as far as the answered ones go (fields and count)."""
    response = await client.get(f"/runs/{run_id}/receipts")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return [{name: item[name] for name in answered[0]} for item in items]


@pytest.mark.parametrize(
    ("kind", "where"),
    [("nul", "/text"), ("surrogate", "/text"), ("nul_key", "/a\x00b")],
)
async def test_an_unstorable_output_fails_its_call_with_a_stored_receipt(
    client: httpx.AsyncClient, kind: str, where: str
) -> None:
    plan = {
        "owner": "hostile",
        "calls": [
            _call("first", "counted", {"text": "before"}),
            _call("bad", "unstorable_output", {"kind": kind}),
            _call("after", "counted", {"text": "after"}),
        ],
    }

    response = await client.post("/plans/sequential", json=plan)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "failed"
    answered = body["receipts"]
    assert [r["status"] for r in answered] == ["succeeded", "failed", "skipped"]
    bad = answered[1]
    assert bad["output"] is None
    assert bad["error"]["kind"] == "output_schema"
    assert "cannot be stored" in bad["error"]["message"]
    assert where.replace("\x00", "\\u0000") in bad["error"]["message"]
    assert unstorable_tools.runs == ["before", kind]
    assert await _stored(client, body["plan_id"], answered) == answered


@pytest.mark.parametrize("kind", ["nul", "surrogate"])
async def test_an_unstorable_error_message_is_stored_escaped(
    client: httpx.AsyncClient, kind: str
) -> None:
    plan = {
        "owner": "hostile",
        "max_concurrency": 2,
        "lanes": [
            {"item_key": "a", "calls": [_call("1", "unstorable_error", {"kind": kind})]},
            {"item_key": "b", "calls": [_call("1", "counted", {"text": "b"})]},
        ],
    }

    response = await client.post("/plans/parallel", json=plan)

    assert response.status_code == 200, response.text
    body = response.json()
    failed = body["lanes"][0]["receipts"][0]
    assert (failed["status"], failed["error"]["kind"]) == ("failed", "exception")
    escaped = {"nul": "a\\u0000b", "surrogate": "a\\ud800b"}[kind]
    assert failed["error"]["message"] == f"RuntimeError: failed on {escaped}"
    assert body["lanes"][1]["receipts"][0]["status"] == "succeeded"
    answered = [failed, body["lanes"][1]["receipts"][0]]
    assert await _stored(client, body["plan_id"], answered) == answered
