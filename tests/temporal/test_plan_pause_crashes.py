"""A plan paused on Temporal whose decision reached the store but not its workflow:
`serve` lost between committing the last decision and sending `resume`, a duplicate
`resume`, and a run closed while it waited (its contract changed). The workflow asks
the store where its run stands, so none strands the run or its workflow."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.store.database import create_database_engine, create_session_factory
from app.store.repositories.router_runs import RouterRunRepository
from app.store.repositories.runs import ORCHESTRATED
from app.temporal.handles import workflow_id
from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack, open_stack
from tests.temporal.registry import REGISTRY

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    stack = open_stack(workdir, env, workers=1)
    yield stack
    stack.close()


def _plan(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "owner": "tester",
        "calls": [{"call_key": key, "tool": tool, "args": {"text": key}} for key, tool in calls],
    }


def _pending(stack: Stack, plan: dict[str, Any]) -> dict[str, Any]:
    response = stack.post("/plans/sequential", plan)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == "pending", body
    return body


def _approve(stack: Stack, run_id: str, confirmation_id: str) -> Any:
    return stack.post(
        f"/runs/{run_id}/confirmations/{confirmation_id}", {"approve": True, "reason": "ok"}
    )


def _approve_in_store_only(stack: Stack, run_id: str, confirmation_id: str) -> None:
    """What `serve` commits for the decision that leaves nothing pending on the Temporal
    executor (the decision, the run back to `running`, the kept arguments dropped), and
    not the `resume` it sends after: as if it were killed between the two."""

    async def commit() -> None:
        engine = create_database_engine(stack.env["TOOLLOOP_DATABASE_URL"])
        try:
            async with create_session_factory(engine).begin() as session:
                repo = RouterRunRepository(session)
                assert await repo.decide(
                    confirmation_id, status="approved", reason="ok", decided_by=None
                )
                assert await repo.claim(run_id, ORCHESTRATED)
                await repo.release(run_id)
        finally:
            await engine.dispose()

    asyncio.run(commit())


def _resume(stack: Stack, run_id: str) -> None:
    """Send the run's workflow a `resume` as `serve` does after a decision."""
    from temporalio.client import Client

    from app.temporal.confirmation_messages import RESUME, Settlement

    async def nudge() -> None:
        client = await Client.connect(stack.env["TOOLLOOP_TEMPORAL_ADDRESS"])
        handle = client.get_workflow_handle(workflow_id(run_id))
        await handle.execute_update(RESUME, result_type=Settlement)

    asyncio.run(nudge())


def test_a_decision_whose_resume_was_never_sent_still_completes_the_run(stack: Stack) -> None:
    body = _pending(stack, _plan(("a", "echo"), ("b", "approved"), ("c", "echo")))
    run_id = body["plan_id"]

    _approve_in_store_only(stack, run_id, body["pending"][0]["confirmation_id"])

    assert stack.ended_run(run_id)["status"] == "succeeded"
    assert [r["status"] for r in stack.receipts(run_id)] == ["succeeded"] * 3
    assert stack.workflow_status(run_id) == "COMPLETED"


def test_a_second_resume_does_not_let_the_next_pause_go_on_undecided(stack: Stack) -> None:
    body = _pending(stack, _plan(("a", "approved"), ("b", "approved")))
    run_id = body["plan_id"]
    first = _approve(stack, run_id, body["pending"][0]["confirmation_id"])
    assert first.status_code == 202, first.text

    def waits_again() -> list[dict[str, Any]] | None:
        items = stack.get("/confirmations?status=pending").json()["items"]
        return [i for i in items if i["run_id"] == run_id] or None

    (second,) = wait_for_sync(waits_again, "the second call waits")
    _resume(stack, run_id)
    _resume(stack, run_id)

    assert stack.get(f"/runs/{run_id}").json()["status"] == "pending"
    assert [r["call_key"] for r in stack.receipts(run_id)] == ["a"]
    assert _approve(stack, run_id, second["confirmation_id"]).status_code == 202
    assert stack.ended_run(run_id)["status"] == "succeeded"
    assert [r["status"] for r in stack.receipts(run_id)] == ["succeeded"] * 2


def test_a_run_closed_while_it_waited_ends_its_workflow_as_it_stands(stack: Stack) -> None:
    body = _pending(stack, _plan(("a", "echo"), ("b", "approved")))
    run_id = body["plan_id"]
    changed = stack.workdir / "changed-registry.yml"
    changed.write_text(REGISTRY.replace("Needs a person's approval.", "Needs a yes."))
    kept_env = dict(stack.env)
    assert stack.server is not None
    stack.server.stop()
    stack.env = {**kept_env, "TOOLLOOP_REGISTRIES": str(changed)}
    try:
        stack.serve()
        refused = _approve(stack, run_id, body["pending"][0]["confirmation_id"])
        assert refused.status_code == 409, refused.text
        assert "contract changed" in refused.json()["detail"]

        wait_for_sync(
            lambda: stack.workflow_status(run_id) == "COMPLETED" or None,
            "the workflow ended",
        )
        assert stack.get(f"/runs/{run_id}").json()["status"] == "failed"
        assert [r["call_key"] for r in stack.receipts(run_id)] == ["a"]
    finally:
        stack.server.stop()
        stack.env = kept_env
        stack.serve()
