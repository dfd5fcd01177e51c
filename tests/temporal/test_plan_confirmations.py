"""Plans that wait for confirmations on the Temporal executor, end to end over HTTP:
the call waits in its workflow (no process holds it), serve answers `pending` once
every chain finished or waits, and a decision continues the workflow, as a local
plan run's decision continues the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack, open_stack

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    stack = open_stack(workdir, env, workers=2)
    yield stack
    stack.close()


def _sequential(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "owner": "tester",
        "calls": [
            {"call_key": key, "tool": tool, "args": {"text": text}} for key, tool, text in calls
        ],
    }


APPROVE_ONE = _sequential(("a", "echo", "a"), ("b", "approved", "b"), ("c", "echo", "c"))


def _decide(stack: Stack, run_id: str, confirmation_id: str, approve: bool) -> Any:
    return stack.post(
        f"/runs/{run_id}/confirmations/{confirmation_id}",
        {"approve": approve, "reason": "approved" if approve else "not today"},
    )


def _pending(stack: Stack, plan: dict[str, Any], kind: str = "sequential") -> dict[str, Any]:
    response = stack.post(f"/plans/{kind}", plan)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == "pending", body
    return body


def _by_key(receipts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {(r["item_key"] or "") + r["call_key"]: r for r in receipts}


def test_a_waiting_call_answers_pending_and_runs_once_approved(stack: Stack) -> None:
    body = _pending(stack, APPROVE_ONE)
    run_id = body["plan_id"]
    (pending,) = body["pending"]
    listed = stack.get("/confirmations?status=pending").json()["items"]

    decided = _decide(stack, run_id, pending["confirmation_id"], approve=True)

    assert [r["call_key"] for r in body["receipts"]] == ["a"]
    assert (pending["call_key"], pending["tool"]) == ("b", "approved")
    assert [(i["run_id"], i["confirmation_id"]) for i in listed if i["run_id"] == run_id] == [
        (run_id, pending["confirmation_id"])
    ]
    assert decided.status_code == 202, decided.text
    assert decided.json()["run_status"] == "running"
    assert stack.ended_run(run_id)["status"] == "succeeded"
    receipts = _by_key(stack.receipts(run_id))
    assert [receipts[k]["status"] for k in "abc"] == ["succeeded"] * 3
    assert receipts["b"]["output"]["text"] == "b"
    (item,) = [i for i in stack.get("/confirmations").json()["items"] if i["run_id"] == run_id]
    assert item["status"] == "approved"


def test_a_rejected_call_is_denied_and_the_rest_of_its_chain_skipped(stack: Stack) -> None:
    body = _pending(stack, APPROVE_ONE)
    run_id = body["plan_id"]

    decided = _decide(stack, run_id, body["pending"][0]["confirmation_id"], approve=False)

    assert decided.status_code == 202, decided.text
    assert stack.ended_run(run_id)["status"] == "failed"
    receipts = _by_key(stack.receipts(run_id))
    assert receipts["a"]["status"] == "succeeded"
    assert receipts["b"]["status"] == "denied"
    assert receipts["b"]["error"]["kind"] == "confirmation"
    assert "not today" in receipts["b"]["error"]["message"]
    assert receipts["c"]["status"] == "skipped"


def test_a_second_decision_on_the_same_call_is_a_conflict(stack: Stack) -> None:
    body = _pending(stack, APPROVE_ONE)
    run_id, confirmation_id = body["plan_id"], body["pending"][0]["confirmation_id"]

    first = _decide(stack, run_id, confirmation_id, approve=True)
    second = _decide(stack, run_id, confirmation_id, approve=False)

    assert first.status_code == 202, first.text
    assert second.status_code == 409, second.text
    assert stack.ended_run(run_id)["status"] == "succeeded"
    assert _by_key(stack.receipts(run_id))["b"]["status"] == "succeeded"


def test_a_chain_that_waits_twice_pauses_twice(stack: Stack) -> None:
    plan = _sequential(("a", "approved", "a"), ("b", "approved", "b"))
    body = _pending(stack, plan)
    run_id = body["plan_id"]

    _decide(stack, run_id, body["pending"][0]["confirmation_id"], approve=True)

    def paused_again() -> list[dict[str, Any]] | None:
        items = stack.get("/confirmations?status=pending").json()["items"]
        mine = [item for item in items if item["run_id"] == run_id]
        return mine or None

    (second,) = wait_for_sync(paused_again, "the run paused at its second call")
    assert second["call_key"] == "b"
    assert stack.get(f"/runs/{run_id}").json()["status"] == "pending"
    _decide(stack, run_id, second["confirmation_id"], approve=True)
    assert stack.ended_run(run_id)["status"] == "succeeded"
    assert [r["status"] for r in stack.receipts(run_id)] == ["succeeded", "succeeded"]


def test_a_waiting_lane_gives_its_place_to_the_others_which_finish(stack: Stack) -> None:
    plan = {
        "owner": "tester",
        "max_concurrency": 1,
        "lanes": [
            {
                "item_key": "w",
                "calls": [{"call_key": "1", "tool": "approved", "args": {"text": "w"}}],
            },
            {
                "item_key": "r",
                "calls": [
                    {"call_key": "1", "tool": "echo", "args": {"text": "r1"}},
                    {"call_key": "2", "tool": "echo", "args": {"text": "r2"}},
                ],
            },
        ],
    }

    body = _pending(stack, plan, "parallel")

    lanes = {lane["item_key"]: lane for lane in body["lanes"]}
    assert lanes["w"]["status"] == "pending"
    assert lanes["w"]["receipts"] == []
    assert lanes["r"]["status"] == "succeeded"
    assert [r["status"] for r in lanes["r"]["receipts"]] == ["succeeded", "succeeded"]
    ((pending),) = body["pending"]
    assert (pending["item_key"], pending["call_key"]) == ("w", "1")
    _decide(stack, body["plan_id"], pending["confirmation_id"], approve=True)
    assert stack.ended_run(body["plan_id"])["status"] == "succeeded"
    receipts = _by_key(stack.receipts(body["plan_id"]))
    assert receipts["w1"]["output"]["text"] == "w"


def test_a_paused_run_is_cancelled_and_its_workflow_ends(stack: Stack) -> None:
    body = _pending(stack, APPROVE_ONE)
    run_id = body["plan_id"]

    response = stack.post(f"/runs/{run_id}/cancel", {})

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    assert stack.ended_run(run_id)["status"] == "cancelled"
    assert stack.workflow_status(run_id) == "CANCELED"
    items = stack.get("/confirmations").json()["items"]
    assert [i["status"] for i in items if i["run_id"] == run_id] == ["refused"]
    decided = _decide(stack, run_id, body["pending"][0]["confirmation_id"], approve=True)
    assert decided.status_code == 409


def test_a_decision_after_serve_and_every_worker_were_killed_completes_the_run(
    stack: Stack,
) -> None:
    body = _pending(stack, APPROVE_ONE)
    run_id = body["plan_id"]
    assert stack.server is not None
    stack.server.kill()
    for worker in list(stack.workers):
        worker.kill()
        stack.workers.remove(worker)
    stack.start_worker()
    stack.serve()

    decided = _decide(stack, run_id, body["pending"][0]["confirmation_id"], approve=True)

    assert decided.status_code == 202, decided.text
    assert stack.ended_run(run_id)["status"] == "succeeded"
    assert [r["status"] for r in stack.receipts(run_id)] == ["succeeded"] * 3
