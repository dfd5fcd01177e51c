"""Plans by kind and status; preflight rejections by a bounded reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.contract import load_contract
from app.engine.plan import PlanLimits, PlannedCall, SequentialPlan
from app.engine.preflight import ProblemCode, preflight_sequential
from app.observability.plans import record_plan_rejected
from tests.observability.metrics_reading import value
from tests.observability.registry import OWNER, write_registry

ECHO = {"call_key": "1", "tool": "echo", "args": {"text": "x"}}


async def test_plans_are_counted_by_kind_and_status(client: httpx.AsyncClient) -> None:
    succeeded = value("toolloop_plans_total", kind="sequential", status="succeeded")
    failed = value("toolloop_plans_total", kind="parallel", status="failed")
    rejected = value("toolloop_plans_total", kind="sequential", status="rejected")

    ok = await client.post("/plans/sequential", json={"owner": OWNER, "calls": [ECHO]})
    bad = await client.post(
        "/plans/parallel",
        json={
            "owner": OWNER,
            "max_concurrency": 2,
            "lanes": [
                {"item_key": "a", "calls": [ECHO]},
                {"item_key": "b", "calls": [{**ECHO, "tool": "leak"}]},
            ],
        },
    )
    refused = await client.post("/plans/sequential", json={"owner": "nobody", "calls": [ECHO]})

    assert [ok.status_code, bad.status_code, refused.status_code] == [200, 200, 422]
    assert value("toolloop_plans_total", kind="sequential", status="succeeded") == succeeded + 1
    assert value("toolloop_plans_total", kind="parallel", status="failed") == failed + 1
    assert value("toolloop_plans_total", kind="sequential", status="rejected") == rejected + 1


@pytest.mark.parametrize(
    ("plan", "reason"),
    [
        ({"owner": "nobody", "calls": [ECHO]}, "unknown_owner"),
        ({"owner": OWNER, "calls": [{**ECHO, "tool": "missing"}]}, "unknown_tool"),
        ({"owner": OWNER, "calls": [{**ECHO, "tool": "unlisted"}]}, "not_allowed"),
        ({"owner": OWNER, "calls": [{**ECHO, "args": {"text": 5}}]}, "invalid_args"),
        ({"owner": OWNER, "calls": [ECHO, ECHO]}, "duplicate_key"),
        ({"owner": OWNER, "calls": []}, "invalid_request"),
        (
            {"owner": OWNER, "calls": [{**ECHO, "payload": {"text": "x"}}]},
            "invalid_request",
        ),
    ],
)
async def test_each_rejection_counts_under_its_reason(
    client: httpx.AsyncClient, plan: dict[str, Any], reason: str
) -> None:
    before = value("toolloop_preflight_rejections_total", kind="sequential", reason=reason)

    response = await client.post("/plans/sequential", json=plan)

    assert response.status_code == 422, response.text
    after = value("toolloop_preflight_rejections_total", kind="sequential", reason=reason)
    assert after == before + 1


async def test_a_limit_rejection_counts_as_limits(client: httpx.AsyncClient) -> None:
    before = value("toolloop_preflight_rejections_total", kind="parallel", reason="limits")

    response = await client.post(
        "/plans/parallel",
        json={
            "owner": OWNER,
            "max_concurrency": 100_000,
            "lanes": [{"item_key": "a", "calls": [ECHO]}],
        },
    )

    assert response.status_code == 422, response.text
    assert value("toolloop_preflight_rejections_total", kind="parallel", reason="limits") == (
        before + 1
    )


def test_a_plan_counts_once_per_reason_however_many_problems(tmp_path: Path) -> None:
    calls = tuple(PlannedCall(f"k{i}", "missing", {"text": "x"}) for i in range(50))
    plan = SequentialPlan(owner="nobody", calls=calls)
    contract = load_contract([write_registry(tmp_path)])
    checked = preflight_sequential(plan, contract, PlanLimits())
    codes = sorted({problem.code for problem in checked.problems})
    assert codes == [ProblemCode.UNKNOWN_OWNER, ProblemCode.UNKNOWN_TOOL]
    owner = value("toolloop_preflight_rejections_total", kind="sequential", reason="unknown_owner")
    tool = value("toolloop_preflight_rejections_total", kind="sequential", reason="unknown_tool")

    record_plan_rejected("sequential", checked.problems)

    assert value(
        "toolloop_preflight_rejections_total", kind="sequential", reason="unknown_owner"
    ) == (owner + 1)
    assert value(
        "toolloop_preflight_rejections_total", kind="sequential", reason="unknown_tool"
    ) == (tool + 1)


def test_an_unknown_plan_kind_is_labelled_other() -> None:
    before = value("toolloop_plans_total", kind="other", status="rejected")

    record_plan_rejected("caller supplied kind", [])

    assert value("toolloop_plans_total", kind="other", status="rejected") == before + 1
