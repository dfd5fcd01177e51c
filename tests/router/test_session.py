"""The caller's copy of a receipt, derived from its stored copy instead of rendered again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from app.engine.receipt import CallError, ErrorKind, Receipt, Status
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor
from app.router.loop import Finished
from app.router.session import caller_copy
from tests.router.harness import RouterHarness, request
from tests.support.fake_llm import openai_calls, openai_text

SECRET = "sk-" + "a" * 32


def receipt(**changes: Any) -> Receipt:
    started = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    values: dict[str, Any] = {
        "receipt_id": "r1",
        "run_id": "run-1",
        "seq": 3,
        "owner": "agent",
        "tool": "echo",
        "call_key": "t1c0",
        "item_key": None,
        "parallel_batch_id": None,
        "status": Status.SUCCEEDED,
        "output": {"text": "hello", "token": SECRET},
        "error": None,
        "attempts": 1,
        "cache_hit": False,
        "cache_source_receipt_id": None,
        "fingerprint": "sha256:" + "f" * 64,
        "definition_hash": "sha256:" + "d" * 64,
        "idempotency_key": "run-1:3",
        "parent_receipt_id": None,
        "control": None,
        "admission_wait_ms": 0.25,
        "started_at": started,
        "finished_at": started + timedelta(milliseconds=2),
        "duration_ms": 2.0,
        "redactor": DEFAULT_REDACTOR,
    }
    values.update(changes)
    return Receipt(**values)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"redactor": Redactor(["token"]), "output": {"token": "plain", "n": [1, 2]}},
        {
            "status": Status.FAILED,
            "output": None,
            "error": CallError(ErrorKind.EXCEPTION, f"boom with {SECRET}", outcome_unknown=True),
        },
        {"control": {"next": "later", "key": SECRET}, "parent_receipt_id": "r0"},
        {"item_key": "i", "parallel_batch_id": "b", "cache_hit": True},
    ],
)
def test_the_caller_copy_is_the_receipts_response_byte_for_byte(changes: dict[str, Any]) -> None:
    made = receipt(**changes)
    stored = made.to_stored()
    kept = dict(stored)

    copy = caller_copy(made, stored)

    expected = made.to_response()
    # The response's times are datetimes, the stored copy's their text: equal as sent.
    assert list(copy) == list(expected)
    assert orjson.dumps(copy) == orjson.dumps(expected)
    # The stored copy is left as it was (the run keeps it).
    assert stored == kept


async def test_an_outcomes_receipts_are_the_responses_of_the_runs_receipts(
    harness: RouterHarness,
) -> None:
    harness.model.script(
        openai_calls(("c1", "echo", {"text": f"say {SECRET}"})),
        openai_calls(("c2", "explode", {"text": "x"})),
        openai_text("done"),
        openai_text("answer"),
    )

    result = await harness.start(request())

    assert isinstance(result, Finished)
    receipts = sorted(harness.runs[0].session.receipts, key=lambda r: r.seq)
    assert len(receipts) == 2
    expected = [r.to_response() for r in receipts]
    assert orjson.dumps(result.outcome.receipts) == orjson.dumps(expected)
    # The caller's copy has the real output; the stored one is redacted.
    assert result.outcome.receipts[0]["output"] == {"text": f"say {SECRET}"}
    assert SECRET not in orjson.dumps(result.stored).decode()
