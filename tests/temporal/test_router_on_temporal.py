"""Router runs on the Temporal executor: the router's loop runs in `toolloop worker`
processes, a stretch per activity, each model request made by the worker (which holds
the profiles) to the scripted fake model served on 127.0.0.1."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_server import ServerProcess
from tests.router.http_support import OUTCOME_KEYS
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text
from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack
from tests.temporal.router_stack import open_router_stack, router_ended

pytestmark = pytest.mark.postgres

# Keys of the read API's receipt view that a router response's receipts do not have.
STORE_ONLY = {
    "run_id",
    "seq",
    "owner",
    "created_at",
    "output_truncated",
    "output_digest",
    "trace_id",
}


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]], model: tuple[FakeLLM, str]) -> Iterator[Stack]:
    stack = open_router_stack(*stack_env, model[1])
    yield stack
    stack.close()


def _body(**overrides: Any) -> dict[str, Any]:
    return {
        "owner": "tester",
        "goal": "Echo a greeting.",
        "context": {"trace_id": "t-temporal"},
        "router_profile": "router-small",
        "final_profile": "final-local",
        "allowed_tools": ["echo", "gate"],
    } | overrides


def test_a_router_run_ends_done_with_its_receipts(stack: Stack, fake: FakeLLM) -> None:
    fake.script(
        openai_calls(("c1", "echo", {"text": "hello", "secret": "s3cret"})),
        openai_text("enough"),
        openai_text("The greeting was hello."),
    )
    steps = [{"call_key": "first", "tool": "echo", "args": {"text": "step"}}]

    response = stack.post("/router/runs", _body(steps=steps))

    assert response.status_code == 200, response.text
    outcome = response.json()
    assert set(outcome) >= OUTCOME_KEYS
    assert (outcome["status"], outcome["stopped_by"]) == ("done", "")
    assert outcome["text"] == "The greeting was hello."
    assert (outcome["turns"], outcome["attempts"]) == (2, 1)
    receipts = outcome["receipts"]
    assert [(r["call_key"], r["tool"], r["status"]) for r in receipts] == [
        ("first", "echo", "succeeded"),
        ("t1c0", "echo", "succeeded"),
    ]
    assert receipts[1]["output"] == {"text": "hello", "secret": "[REDACTED]"}
    stored = stack.receipts(outcome["run_id"])
    assert [{k: v for k, v in r.items() if k not in STORE_ONLY} for r in stored] == receipts
    assert stack.get(f"/runs/{outcome['run_id']}").json()["status"] == "done"
    # The worker made every model request: the router's second saw the first call's result.
    assert "hello" in fake.tool_results(1)["c1"]


# The system prompt tells the model the seconds its run has left: the one thing that
# differs between two runs of one script.
SECONDS_LEFT = re.compile(r"seconds_left\W+[0-9.]+")


def _model_requests(fake: FakeLLM, first: int) -> list[str]:
    """The bodies of the model requests from the `first`-th on, the seconds left aside."""
    bodies = [json.dumps(fake.body(index)) for index in range(first, len(fake.requests))]
    return [SECONDS_LEFT.sub("seconds_left: _", body) for body in bodies]


def test_the_model_is_sent_the_conversation_a_local_run_sends_it(
    stack: Stack, fake: FakeLLM
) -> None:
    """Secrets in the goal, in a reply's text and in a call's arguments reach the model
    as they are, from every turn, as in a local run (Temporal's history holds only the
    redacted checkpoint)."""
    script = (
        openai_calls(
            ("c1", "echo", {"text": "hello", "secret": "s3cret"}),
            text="Using sk-abcdefghijklmnopqrstuvwx to call.",
        ),
        openai_calls(("c2", "echo", {"text": "again", "secret": "s3cret-2"})),
        openai_text("enough"),
        openai_text("The greeting was hello."),
    )
    body = _body(goal="Echo a greeting for https://bot:hunter2@example.test/.")
    local = ServerProcess(
        stack.workdir, [], {**stack.env, "TOOLLOOP_EXECUTOR": "local"}, log_name="local.log"
    )
    try:
        local.wait_until_answering()
        first = len(fake.requests)
        fake.script(*script)
        answered = httpx.post(f"{local.base}/router/runs", json=body, timeout=120)
        assert answered.status_code == 200, answered.text
        assert answered.json()["status"] == "done"
    finally:
        local.stop()
    on_local = _model_requests(fake, first)
    first = len(fake.requests)
    fake.script(*script)

    response = stack.post("/router/runs", body)

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "done"
    on_temporal = _model_requests(fake, first)
    assert len(on_temporal) == len(on_local) == 4
    assert on_temporal == on_local
    assert "s3cret-2" in on_temporal[2]
    assert "hunter2" in on_temporal[1]
    assert "sk-abcdefghijklmnopqrstuvwx" in on_temporal[2]


def test_the_budgets_hold_across_turns_in_different_activities(stack: Stack, fake: FakeLLM) -> None:
    fake.script(
        openai_calls(("c1", "echo", {"text": "one"}), prompt_tokens=10, completion_tokens=5),
        openai_calls(("c2", "echo", {"text": "two"}), prompt_tokens=10, completion_tokens=5),
    )

    response = stack.post("/router/runs", _body(budgets={"max_tokens": 20}))

    assert response.status_code == 200, response.text
    outcome = response.json()
    assert (outcome["status"], outcome["stopped_by"]) == ("incomplete", "budget:max_tokens")
    assert outcome["text"] == ""
    assert [r["call_key"] for r in outcome["receipts"]] == ["t1c0"]
    assert outcome["state"]["tokens"]["total"] == 30


def test_the_turn_budget_stops_the_run_before_its_model_request(
    stack: Stack, fake: FakeLLM
) -> None:
    fake.script(openai_calls(("c1", "echo", {"text": "one"})))

    response = stack.post("/router/runs", _body(budgets={"max_turns": 1}))

    assert response.status_code == 200, response.text
    outcome = response.json()
    assert (outcome["status"], outcome["stopped_by"]) == ("incomplete", "budget:max_turns")
    assert outcome["turns"] == 1


def _paused(stack: Stack, fake: FakeLLM) -> dict[str, Any]:
    fake.script(openai_calls(("c1", "approved", {"text": "publish me"})))
    response = stack.post("/router/runs", _body(allowed_tools=["echo", "approved"]))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert (body["status"], body["stopped_by"]) == ("pending", "confirmation")
    return body


def _decide(stack: Stack, body: dict[str, Any], approve: bool) -> Any:
    confirmation_id = body["pending"][0]["confirmation_id"]
    return stack.post(
        f"/runs/{body['run_id']}/confirmations/{confirmation_id}",
        {"approve": approve, "reason": "checked" if approve else "not this one"},
    )


def test_a_run_waits_for_a_confirmation_and_an_approval_runs_the_call(
    stack: Stack, fake: FakeLLM
) -> None:
    body = _paused(stack, fake)
    assert stack.get(f"/runs/{body['run_id']}").json()["status"] == "pending"
    listed = stack.get("/confirmations?status=pending").json()["items"]
    assert [i["kind"] for i in listed if i["run_id"] == body["run_id"]] == ["router"]
    fake.script(openai_text("published"), openai_text("It is published."))

    decided = _decide(stack, body, approve=True)

    assert decided.status_code == 202, decided.text
    view = router_ended(stack, body["run_id"])
    assert view["status"] == "done"
    (receipt,) = stack.receipts(body["run_id"])
    assert (receipt["tool"], receipt["status"]) == ("approved", "succeeded")
    assert receipt["output"] == {"text": "publish me", "secret": None}


def test_a_rejected_call_of_a_router_run_is_denied(stack: Stack, fake: FakeLLM) -> None:
    body = _paused(stack, fake)
    fake.script(openai_text("not published"), openai_text("Nothing was published."))
    asked = len(fake.requests)

    decided = _decide(stack, body, approve=False)

    assert decided.status_code == 202, decided.text
    assert router_ended(stack, body["run_id"])["status"] == "done"
    (receipt,) = stack.receipts(body["run_id"])
    assert receipt["status"] == "denied"
    assert receipt["error"]["kind"] == "confirmation"
    # The model saw the rejection as the call's result.
    assert "not this one" in fake.tool_results(asked)["c1"]


def _started_in(stack: Stack, name: str) -> list[int]:
    marks = stack.marks.glob(f"{name}.started.*")
    return sorted(int(path.name.rsplit(".", 1)[1]) for path in marks)


def test_a_run_whose_worker_is_killed_mid_turn_completes_on_another(
    stack: Stack, fake: FakeLLM
) -> None:
    gate = ("c1", "gate", {"marks": str(stack.marks), "name": "router-turn"})
    # The killed worker asks for the first reply; the turn runs again on the other one.
    fake.script(
        openai_calls(gate),
        openai_calls(gate),
        openai_text("enough"),
        openai_text("The gate opened."),
    )
    response = stack.post("/router/runs", _body(), Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]
    (killed,) = wait_for_sync(lambda: _started_in(stack, "router-turn"), "the gate started")
    (worker,) = [worker for worker in stack.workers if worker.pid == killed]
    worker.kill()
    stack.workers.remove(worker)
    (stack.marks / "router-turn.release").touch()

    run = router_ended(stack, run_id)

    assert run["status"] == "done"
    started = _started_in(stack, "router-turn")
    assert len(started) == 2
    assert killed in started
    receipts = stack.receipts(run_id)
    assert [(r["call_key"], r["status"]) for r in receipts] == [("t1c0", "succeeded")]
    assert receipts[0]["output"]["pid"] != killed
    stack.start_worker()


def test_the_model_requests_of_a_lost_turn_count_against_the_budgets(
    stack: Stack, fake: FakeLLM
) -> None:
    gate = ("c1", "gate", {"marks": str(stack.marks), "name": "lost-usage"})
    # 15 tokens a request: the lost attempt's and the retried attempt's requests take the
    # run past its 29 tokens, so the turn stops before it runs the gate again.
    fake.script(openai_calls(gate), openai_calls(gate))
    body = _body(budgets={"max_tokens": 29})
    response = stack.post("/router/runs", body, Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]
    (killed,) = wait_for_sync(lambda: _started_in(stack, "lost-usage"), "the gate started")
    (worker,) = [worker for worker in stack.workers if worker.pid == killed]
    worker.kill()
    stack.workers.remove(worker)
    (stack.marks / "lost-usage.release").touch()

    run = router_ended(stack, run_id)

    assert (run["status"], run["outcome"]["stopped_by"]) == ("incomplete", "budget:max_tokens")
    state = run["outcome"]["state"]
    assert state["tokens"] == {"input": 20, "output": 10, "total": 30}
    assert state["model_calls"] == 2
    assert _started_in(stack, "lost-usage") == [killed]
    assert stack.receipts(run_id) == []
    stack.start_worker()


def test_a_cancel_cancels_the_workflow_and_the_call_in_flight(stack: Stack, fake: FakeLLM) -> None:
    fake.script(openai_calls(("c1", "gate", {"marks": str(stack.marks), "name": "cancelled"})))
    response = stack.post("/router/runs", _body(), Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]
    wait_for_sync(lambda: _started_in(stack, "cancelled"), "the gate started")

    cancel = stack.post(f"/runs/{run_id}/cancel", {})

    assert cancel.status_code in (200, 202), cancel.text
    run = router_ended(stack, run_id)
    assert run["status"] == "cancelled"
    receipts = stack.receipts(run_id)
    # As in local mode: the call was running, so it may have taken effect.
    assert [(r["call_key"], r["status"]) for r in receipts] == [("t1c0", "failed")]
    assert receipts[0]["error"]["kind"] == "cancelled"
    assert receipts[0]["error"]["outcome_unknown"] is True


def test_a_run_that_may_call_a_non_idempotent_tool_ends_interrupted_when_its_worker_is_lost(
    stack: Stack, fake: FakeLLM
) -> None:
    fake.script(openai_calls(("c1", "gate_once", {"marks": str(stack.marks), "name": "once"})))
    body = _body(allowed_tools=["echo", "gate_once"])
    response = stack.post("/router/runs", body, Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]
    (killed,) = wait_for_sync(lambda: _started_in(stack, "once"), "the gate started")
    (worker,) = [worker for worker in stack.workers if worker.pid == killed]
    worker.kill()
    stack.workers.remove(worker)
    (stack.marks / "once.release").touch()

    run = router_ended(stack, run_id)

    assert run["status"] == "interrupted"
    assert _started_in(stack, "once") == [killed]  # never run a second time
    # As a plan's lost call: a receipt that says the call may have taken effect.
    receipts = stack.receipts(run_id)
    assert [(r["call_key"], r["tool"], r["status"]) for r in receipts] == [
        ("t1c0", "gate_once", "failed")
    ]
    assert receipts[0]["error"]["kind"] == "interrupted"
    assert receipts[0]["error"]["outcome_unknown"] is True
    assert [(r["call_key"], r["status"]) for r in run["outcome"]["receipts"]] == [
        ("t1c0", "failed")
    ]
    stack.start_worker()


def test_a_run_goes_on_when_the_api_process_is_killed(stack: Stack, fake: FakeLLM) -> None:
    fake.script(
        openai_calls(("c1", "gate", {"marks": str(stack.marks), "name": "api-killed"})),
        openai_text("enough"),
        openai_text("The gate opened."),
    )
    response = stack.post("/router/runs", _body(), Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]
    wait_for_sync(lambda: _started_in(stack, "api-killed"), "the gate started")
    assert stack.server is not None
    stack.server.kill()
    (stack.marks / "api-killed.release").touch()

    stack.serve()  # a new API process; its start marks stopped processes' runs interrupted
    run = router_ended(stack, run_id)

    assert run["status"] == "done"
    assert [r["status"] for r in stack.receipts(run_id)] == ["succeeded"]


def test_a_cancel_reaches_the_workflow_from_another_api_process(
    stack: Stack, fake: FakeLLM
) -> None:
    fake.script(openai_calls(("c1", "gate", {"marks": str(stack.marks), "name": "elsewhere"})))
    response = stack.post("/router/runs", _body(), Prefer="respond-async")
    assert response.status_code == 202, response.text
    run_id = response.headers["Location"].rsplit("/", 1)[1]
    wait_for_sync(lambda: _started_in(stack, "elsewhere"), "the gate started")
    assert stack.server is not None
    stack.server.kill()
    stack.serve()

    cancel = stack.post(f"/runs/{run_id}/cancel", {})

    assert cancel.status_code in (200, 202), cancel.text
    assert router_ended(stack, run_id)["status"] == "cancelled"


def test_a_waiting_run_is_cancelled_and_its_workflow_ends(stack: Stack, fake: FakeLLM) -> None:
    body = _paused(stack, fake)

    cancel = stack.post(f"/runs/{body['run_id']}/cancel", {})

    assert cancel.status_code == 200, cancel.text
    assert cancel.json()["status"] == "cancelled"
    assert router_ended(stack, body["run_id"])["status"] == "cancelled"
    assert stack.workflow_status(body["run_id"]) == "CANCELED"
    assert stack.receipts(body["run_id"]) == []


def test_a_decision_after_serve_and_every_worker_were_killed_resumes_the_run(
    stack: Stack, fake: FakeLLM
) -> None:
    body = _paused(stack, fake)
    assert stack.server is not None
    stack.server.kill()
    for worker in list(stack.workers):
        worker.kill()
        stack.workers.remove(worker)
    stack.start_worker()
    stack.serve()
    fake.script(openai_text("published"), openai_text("It is published."))

    decided = _decide(stack, body, approve=True)

    assert decided.status_code == 202, decided.text
    assert router_ended(stack, body["run_id"])["status"] == "done"
    (receipt,) = stack.receipts(body["run_id"])
    assert (receipt["tool"], receipt["status"]) == ("approved", "succeeded")
    stack.start_worker()
