"""A confirmation nobody decides on the Temporal executor expires as a local one does:
serve's sweep rejects it, and the workflow gives the call its `denied` receipt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.temporal.conftest import Stack, open_stack

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stack(stack_env: tuple[Path, dict[str, str]]) -> Iterator[Stack]:
    workdir, env = stack_env
    short = {
        **env,
        "TOOLLOOP_CONFIRMATION_TTL_S": "1",
        "TOOLLOOP_CONFIRMATION_EXPIRY_INTERVAL_S": "0.2",
    }
    stack = open_stack(workdir, short, workers=1)
    yield stack
    stack.close()


def test_an_expired_confirmation_denies_its_call_and_skips_the_rest(stack: Stack) -> None:
    plan = {
        "owner": "tester",
        "calls": [
            {"call_key": "wait", "tool": "approved", "args": {"text": "w"}},
            {"call_key": "after", "tool": "echo", "args": {"text": "a"}},
        ],
    }
    response = stack.post("/plans/sequential", plan)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "pending"

    run = stack.ended_run(body["plan_id"])

    assert run["status"] == "failed"
    receipts = {r["call_key"]: r for r in stack.receipts(body["plan_id"])}
    assert receipts["wait"]["status"] == "denied"
    assert receipts["wait"]["error"]["kind"] == "confirmation"
    assert receipts["after"]["status"] == "skipped"
    (item,) = [
        i for i in stack.get("/confirmations").json()["items"] if i["run_id"] == body["plan_id"]
    ]
    assert item["status"] == "expired"
