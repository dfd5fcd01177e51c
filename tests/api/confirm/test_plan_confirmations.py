"""Plans pause before a call of a tool that requires confirmation."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.api.confirm import tools
from tests.api.confirm.support import (
    launch,
    parallel,
    sequential,
    step,
    stored_confirmations,
)
from tests.support.app import stored_audit, stored_receipts, stored_run

SECRET = "sk-abcdefghijklmnopqrstuvwxyz"


async def test_a_sequential_plan_pauses_before_the_call_and_keeps_the_receipts_before_it(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served

    response = await client.post(
        "/plans/sequential",
        json=sequential(step("a"), launch("b", secret=SECRET), step("c")),
    )

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "pending"
    assert [r["call_key"] for r in body["receipts"]] == ["a"]
    (pending,) = body["pending"]
    assert set(pending) == {"confirmation_id", "call_key", "item_key", "tool", "args_digest"}
    assert (pending["call_key"], pending["item_key"], pending["tool"]) == ("b", None, "launch")
    assert tools.calls == {"a": 1}
    run = await stored_run(app, body["plan_id"])
    assert run.status == "pending"
    assert [r.call_key for r in await stored_receipts(app, body["plan_id"])] == ["a"]
    (kept,) = await stored_confirmations(app, body["plan_id"])
    assert (kept.id, kept.status, kept.seq, kept.call_id) == (
        pending["confirmation_id"],
        "pending",
        1,
        None,
    )
    assert kept.args == {"label": "b", "secret": SECRET}
    requested = [e for e in await stored_audit(app, body["plan_id"]) if "confirmation" in e.kind]
    assert [e.kind for e in requested] == ["confirmation.requested"]
    assert requested[0].detail["args"]["secret"] == "[REDACTED]"


async def test_a_parallel_plan_waits_in_one_lane_while_the_others_finish(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = served

    response = await client.post(
        "/plans/parallel",
        json=parallel(
            ("x", [step("x1"), launch("x2"), step("x3")]),
            ("y", [step("y1"), step("y2")]),
            ("z", [launch("z1")]),
        ),
    )

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "pending"
    assert [lane["status"] for lane in body["lanes"]] == ["pending", "succeeded", "pending"]
    assert [len(lane["receipts"]) for lane in body["lanes"]] == [1, 2, 0]
    assert [(p["item_key"], p["call_key"]) for p in body["pending"]] == [
        ("x", "x2"),
        ("z", "z1"),
    ]
    assert tools.calls == {"x1": 1, "y1": 1, "y2": 1}
    assert (await stored_run(app, body["plan_id"])).status == "pending"
    kept = await stored_confirmations(app, body["plan_id"])
    assert [(c.item_key, c.call_key, c.seq) for c in kept] == [("x", "x2", 1), ("z", "z1", 5)]
