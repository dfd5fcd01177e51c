"""Hypothesis-generated hostile plans: always a 4xx naming problems, and nothing runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.app import create_app
from app.settings import Settings
from tests.api import plan_tools
from tests.api.plan_registry import REGISTRY

TOOLS = ["echo", "explode", "probe", "ghost", "not_allowed", "", "ëcho", "echo\x00"]
OWNERS = ["tester", "nobody", "", "tëster", "tester\x00"]

hostile_text = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", "\x00", "a\x00b", "ünï", "🙂", "~0/1", "a" * 300]),
)
hostile_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
hostile_json = st.recursive(
    hostile_scalar,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(hostile_text, children, max_size=3)
    ),
    max_leaves=8,
)


def _call(draw: st.DrawFn) -> dict[str, Any]:
    call: dict[str, Any] = {
        "call_key": draw(st.one_of(hostile_text, st.integers(), st.just("k"))),
        "tool": draw(st.one_of(st.sampled_from(TOOLS), st.integers())),
    }
    shape = draw(st.sampled_from(["args", "payload", "both", "neither", "junk"]))
    if shape in ("args", "both"):
        call["args"] = draw(
            st.one_of(st.dictionaries(hostile_text, hostile_json, max_size=3), hostile_json)
        )
    if shape in ("payload", "both"):
        call["payload"] = draw(hostile_json)
    if shape == "junk":
        call[draw(hostile_text)] = draw(hostile_json)
    return call


@st.composite
def hostile_sequential(draw: st.DrawFn) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "owner": draw(st.one_of(st.sampled_from(OWNERS), st.integers())),
        "calls": [_call(draw) for _ in range(draw(st.integers(0, 4)))],
    }
    # Every generated plan carries at least one problem for sure.
    plan["calls"].append({"call_key": "sure", "tool": "ghost", "args": {}})
    if draw(st.booleans()):
        plan["context"] = draw(hostile_json)
    return plan


@st.composite
def hostile_parallel(draw: st.DrawFn) -> dict[str, Any]:
    lanes = [
        {"item_key": draw(st.one_of(hostile_text, st.integers())), "calls": [_call(draw)]}
        for _ in range(draw(st.integers(0, 4)))
    ]
    return {
        "owner": draw(st.sampled_from(OWNERS)),
        "max_concurrency": draw(
            st.one_of(st.sampled_from([0, -1, 10**9, 2**70]), st.integers(), st.floats(), st.text())
        ),
        "lanes": lanes,
    }


def one_call(call: bytes) -> bytes:
    return b'{"owner": "tester", "calls": [' + call + b"]}"


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return value


@pytest.fixture
def settings_(sqlite_url: str, tmp_path: Path) -> Settings:
    registry = tmp_path / "tester.yml"
    registry.write_text(REGISTRY)
    return Settings(registries=[registry], database_url=sqlite_url)


@pytest.fixture
async def hostile_client(settings_: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(settings_)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


async def _assert_rejected_without_running(
    client: httpx.AsyncClient, path: str, body: bytes
) -> None:
    plan_tools.reset()
    response = await client.post(path, content=body, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == response.status_code
    if response.status_code == 422:
        assert problem["errors"], problem
        assert all(isinstance(e["pointer"], str) and e["message"] for e in problem["errors"])
    assert sum(plan_tools.calls.values()) == 0


HYPOTHESIS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@HYPOTHESIS
@given(plan=hostile_sequential())
async def test_hostile_sequential_plans_are_rejected_whole(
    hostile_client: httpx.AsyncClient, plan: dict[str, Any]
) -> None:
    await _assert_rejected_without_running(hostile_client, "/plans/sequential", _dumps(plan))


@HYPOTHESIS
@given(plan=hostile_parallel())
async def test_hostile_parallel_plans_are_rejected_whole(
    hostile_client: httpx.AsyncClient, plan: dict[str, Any]
) -> None:
    await _assert_rejected_without_running(hostile_client, "/plans/parallel", _dumps(plan))


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            one_call(b'{"call_key": "\\ud800", "tool": "echo", "args": {"text": "x"}}'),
            id="lone-surrogate-key",
        ),
        pytest.param(
            one_call(b'{"call_key": "1", "tool": "echo", "args": {"text": "\\udfff"}}'),
            id="lone-surrogate-arg",
        ),
        pytest.param(
            b'{"owner": "tester", "owner": "nobody", "calls": []}', id="duplicate-json-key"
        ),
        pytest.param(
            orjson.dumps(
                {
                    "owner": "tester",
                    "calls": [{"call_key": "1", "tool": "echo", "args": nested(80)}],
                }
            ),
            id="80-levels",
        ),
        pytest.param(b"\xff\xfe garbage", id="not-utf8"),
        pytest.param(
            one_call(b'{"call_key": "1", "tool": "echo", "args": {"text": 1e999}}'),
            id="huge-number",
        ),
    ],
)
async def test_malformed_plan_bytes_are_rejected(
    hostile_client: httpx.AsyncClient, raw: bytes
) -> None:
    await _assert_rejected_without_running(hostile_client, "/plans/sequential", raw)


async def test_nul_bytes_in_otherwise_valid_plans_are_refused_and_nothing_runs(
    hostile_client: httpx.AsyncClient,
) -> None:
    plan = {
        "owner": "tester",
        "calls": [{"call_key": "a\x00b", "tool": "echo", "args": {"text": "x\x00y"}}],
    }
    await _assert_rejected_without_running(hostile_client, "/plans/sequential", _dumps(plan))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
