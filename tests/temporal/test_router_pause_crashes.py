"""A router run on Temporal that paused for a confirmation survives the crashes around
its pause: `serve` lost between committing the last decision and its `RESUME` update,
a duplicate `RESUME`, and a turn's worker lost after it recorded the pause."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from temporalio.client import Client

from app.contract import load_contract
from app.service.runtime import open_runtime
from app.settings import Settings
from app.temporal.client import open_executor
from app.temporal.confirmation_messages import RESUME, Settlement
from app.temporal.converter import DATA_CONVERTER
from app.temporal.handles import workflow_id
from app.temporal.router_messages import ROUTER_LOST
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text
from tests.support.processes import ToolloopProcess
from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack
from tests.temporal.router_stack import open_router_stack, router_ended

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]], model: tuple[FakeLLM, str]) -> Iterator[Stack]:
    stack = open_router_stack(*stack_env, model[1])
    yield stack
    stack.close()


def _body(**overrides: Any) -> dict[str, Any]:
    return {
        "owner": "tester",
        "goal": "Publish the text.",
        "context": {"trace_id": "t-pause-crashes"},
        "router_profile": "router-small",
        "final_profile": "final-local",
        "allowed_tools": ["echo", "approved"],
    } | overrides


def _started(stack: Stack, body: dict[str, Any]) -> str:
    response = stack.post("/router/runs", body, Prefer="respond-async")
    assert response.status_code == 202, response.text
    return response.headers["Location"].rsplit("/", 1)[1]


def _waiting(stack: Stack, run_id: str, *, decided: tuple[str, ...] = ()) -> str:
    """The confirmation the run waits for (once it does), other than those `decided`."""

    def waiting() -> str | None:
        items = stack.get("/confirmations?status=pending").json()["items"]
        ids = [i["confirmation_id"] for i in items if i["run_id"] == run_id]
        ids = [i for i in ids if i not in decided]
        return ids[0] if ids else None

    return wait_for_sync(waiting, f"run {run_id} waits for a confirmation", bound_s=120)


def _approve(stack: Stack, run_id: str, confirmation_id: str) -> None:
    decided = stack.post(
        f"/runs/{run_id}/confirmations/{confirmation_id}", {"approve": True, "reason": "checked"}
    )
    assert decided.status_code == 202, decided.text


def _settings(env: dict[str, str]) -> Settings:
    named = {k.removeprefix("TOOLLOOP_").lower(): v for k, v in env.items()}
    return Settings(**{k: v for k, v in named.items() if k in Settings.model_fields})


async def _decide_without_resuming(env: dict[str, str], run_id: str, confirmation_id: str) -> None:
    """The decision as `serve` commits it, by its own services on the stack's database;
    the run's continuation (its `RESUME` update) is never launched: `serve` died there."""
    settings = _settings(env)
    contract = load_contract(settings.registries, settings.allowed_modules)
    executor = await open_executor(settings, contract)
    runtime = await open_runtime(settings, contract, executor=executor)
    try:
        decided = await runtime.confirmations.decide(
            run_id, confirmation_id, approve=True, reason="checked", decided_by=None
        )
    finally:
        await runtime.aclose()
    assert decided.resume is not None


async def _resume_update(env: dict[str, str], run_id: str) -> str:
    """`serve`'s `RESUME` update sent once more: where the workflow says the run stands."""
    client = await Client.connect(env["TOOLLOOP_TEMPORAL_ADDRESS"], data_converter=DATA_CONVERTER)
    handle = client.get_workflow_handle(workflow_id(run_id))
    answer = await handle.execute_update(RESUME, result_type=Settlement)
    return answer.status


async def _lost_recorded(env: dict[str, str], run_id: str) -> bool:
    """Whether the run's workflow ran its `ROUTER_LOST` activity to its end."""
    client = await Client.connect(env["TOOLLOOP_TEMPORAL_ADDRESS"])
    history = await client.get_workflow_handle(workflow_id(run_id)).fetch_history()
    scheduled = {
        event.event_id
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
        and event.activity_task_scheduled_event_attributes.activity_type.name == ROUTER_LOST
    }
    return any(
        event.HasField("activity_task_completed_event_attributes")
        and event.activity_task_completed_event_attributes.scheduled_event_id in scheduled
        for event in history.events
    )


def _kept(stack: Stack, run_id: str) -> tuple[list[Any], bool]:
    """The run's confirmations' kept arguments, and whether a checkpoint is kept."""
    url = stack.env["TOOLLOOP_DATABASE_URL"].replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        args = [
            row[0]
            for row in conn.execute(
                "SELECT args FROM router_confirmations WHERE run_id = %s", (run_id,)
            )
        ]
        checkpoint = conn.execute(
            "SELECT count(*) FROM router_checkpoints WHERE run_id = %s", (run_id,)
        ).fetchone()
    assert checkpoint is not None
    return args, checkpoint[0] > 0


def _only_a_worker_that_loses_its_paused_turn(stack: Stack) -> ToolloopProcess:
    """Every worker of the stack stopped for good; a worker that kills itself once a
    turn recorded a pause (`lost_turn_worker`) runs the next run alone."""
    for worker in list(stack.workers):
        worker.kill()
        stack.workers.remove(worker)
    lost = ToolloopProcess(
        stack.workdir,
        "run",
        [],
        stack.env,
        log_name=f"lost-turn-worker-{uuid.uuid4().hex[:6]}.log",
        program=(sys.executable, "-m", "tests.temporal.lost_turn_worker"),
    )
    lost.wait_until(lambda: "worker polling" in lost.log(), "the lost-turn worker polls")
    return lost


def _killed_itself(lost: ToolloopProcess) -> None:
    assert lost.process.wait(timeout=120) == -signal.SIGKILL, lost.log()[-2000:]
    lost.kill()  # reaped: its log closes


def test_a_decision_committed_without_its_resume_update_resumes_the_run(
    stack: Stack, fake: FakeLLM
) -> None:
    fake.script(openai_calls(("c1", "approved", {"text": "publish me"})))
    response = stack.post("/router/runs", _body())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "pending"
    run_id = body["run_id"]
    assert stack.server is not None
    stack.server.kill()
    fake.script(openai_text("published"), openai_text("It is published."))

    asyncio.run(_decide_without_resuming(stack.env, run_id, body["pending"][0]["confirmation_id"]))

    stack.serve()
    assert router_ended(stack, run_id)["status"] == "done"
    (receipt,) = stack.receipts(run_id)
    assert (receipt["tool"], receipt["status"]) == ("approved", "succeeded")
    assert receipt["output"] == {"text": "publish me", "secret": None}
    assert _kept(stack, run_id) == ([None], False)


def test_a_second_resume_update_does_not_decide_the_next_pause(stack: Stack, fake: FakeLLM) -> None:
    fake.script(
        openai_calls(("c1", "approved", {"text": "first"})),
        openai_calls(("c2", "approved", {"text": "second"})),
    )
    response = stack.post("/router/runs", _body())
    assert response.status_code == 200, response.text
    run_id = response.json()["run_id"]
    first = _waiting(stack, run_id)
    _approve(stack, run_id, first)
    second = _waiting(stack, run_id, decided=(first,))

    answer = asyncio.run(_resume_update(stack.env, run_id))

    assert answer == "pending"
    assert stack.workflow_status(run_id) == "RUNNING"
    assert stack.get(f"/runs/{run_id}").json()["status"] == "pending"
    assert _waiting(stack, run_id, decided=(first,)) == second
    fake.script(openai_text("enough"), openai_text("Both are published."))
    _approve(stack, run_id, second)
    assert router_ended(stack, run_id)["status"] == "done"
    receipts = stack.receipts(run_id)
    assert [(r["tool"], r["status"], r["output"]["text"]) for r in receipts] == [
        ("approved", "succeeded", "first"),
        ("approved", "succeeded", "second"),
    ]
    assert _kept(stack, run_id) == ([None, None], False)


def test_a_turn_lost_after_it_paused_the_run_is_not_asked_again(
    stack: Stack, fake: FakeLLM
) -> None:
    """The decision comes before the lost turn's retry starts: the retry finds the run
    `running` again, and goes on from the pause its lost attempt recorded."""
    lost = _only_a_worker_that_loses_its_paused_turn(stack)
    fake.script(openai_calls(("c1", "approved", {"text": "publish me"})))
    asked = len(fake.requests)
    run_id = _started(stack, _body())
    _killed_itself(lost)
    confirmation_id = _waiting(stack, run_id)
    fake.script(openai_text("published"), openai_text("It is published."))
    _approve(stack, run_id, confirmation_id)

    stack.start_worker()

    assert router_ended(stack, run_id)["status"] == "done"
    assert len(fake.requests) - asked == 3  # the paused turn's, then the next two
    (receipt,) = stack.receipts(run_id)
    assert (receipt["tool"], receipt["status"]) == ("approved", "succeeded")
    assert receipt["output"] == {"text": "publish me", "secret": None}
    assert _kept(stack, run_id) == ([None], False)
    stack.start_worker()


def test_a_run_that_may_not_run_again_waits_for_the_decision_of_its_lost_turn_s_pause(
    stack: Stack, fake: FakeLLM
) -> None:
    lost = _only_a_worker_that_loses_its_paused_turn(stack)
    fake.script(openai_calls(("c1", "approved", {"text": "publish me"})))
    run_id = _started(stack, _body(allowed_tools=["echo", "approved", "gate_once"]))
    _killed_itself(lost)
    stack.start_worker()
    wait_for_sync(
        lambda: asyncio.run(_lost_recorded(stack.env, run_id)),
        "the lost turn was seen",
        bound_s=120,
    )

    assert stack.get(f"/runs/{run_id}").json()["status"] == "pending"
    assert stack.workflow_status(run_id) == "RUNNING"
    fake.script(openai_text("published"), openai_text("It is published."))
    _approve(stack, run_id, _waiting(stack, run_id))
    assert router_ended(stack, run_id)["status"] == "done"
    (receipt,) = stack.receipts(run_id)
    assert (receipt["tool"], receipt["status"]) == ("approved", "succeeded")
    assert _kept(stack, run_id) == ([None], False)
    stack.start_worker()
