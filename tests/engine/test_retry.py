"""Bounded retry: what is retried, how attempts are counted, and outcome-unknown timeouts."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from app.contract import Effect, RetryPolicy
from app.engine.engine import Engine
from app.engine.ports import AuditKind
from app.engine.receipt import ErrorKind, Status
from app.engine.retry import backoff_delay
from tests.engine import engine_tools
from tests.engine.harness import tool

RETRY_3 = {"max_attempts": 3, "backoff_s": 0.0}
# The contract refuses retry on a non_idempotent tool; retried tools here are idempotent.
IDEMPOTENT = {"effect": "idempotent"}


def test_backoff_is_full_jitter_capped_by_backoff_max() -> None:
    policy = RetryPolicy(max_attempts=10, backoff_s=0.1, backoff_max_s=0.5)
    rng = random.Random(7)
    for failures, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (500, 0.5)]:
        delays = [backoff_delay(policy, failures, rng) for _ in range(200)]
        assert all(0.0 <= delay <= ceiling for delay in delays)
    assert backoff_delay(RetryPolicy(3, 0.0, 0.0), 2, rng) == 0.0


async def test_exception_is_retried_and_the_idempotency_key_is_stable(
    make_harness: Any,
) -> None:
    harness = make_harness({"f": tool("flaky", retry=RETRY_3, **IDEMPOTENT)})

    outcome = await harness.sequential([("1", "f", {"succeed_on": 3})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.SUCCEEDED
    assert receipt.attempts == 3
    seen = engine_tools.STATE.contexts
    assert [context["attempt"] for context in seen] == [1, 2, 3]
    assert {context["idempotency_key"] for context in seen} == {receipt.idempotency_key}
    assert {context["receipt_id"] for context in seen} == {receipt.receipt_id}
    retried = harness.events(AuditKind.CALL_RETRIED)
    assert [event.detail["next_attempt"] for event in retried] == [2, 3]


async def test_exceptions_stop_at_max_attempts(make_harness: Any) -> None:
    harness = make_harness({"f": tool("fail", retry=RETRY_3, **IDEMPOTENT)})

    outcome = await harness.sequential([("1", "f", {"message": "down"})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.attempts == 3
    assert engine_tools.STATE.calls["fail"] == 3


async def test_without_a_retry_policy_a_call_runs_once(make_harness: Any) -> None:
    harness = make_harness({"f": tool("fail")})

    outcome = await harness.sequential([("1", "f", {"message": "down"})])

    assert outcome.receipts[0].attempts == 1


async def test_output_schema_failures_are_never_retried(make_harness: Any) -> None:
    schema = {"type": "object", "required": ["ok"]}
    harness = make_harness(
        {"b": tool("bad_output", retry=RETRY_3, output_schema=schema, **IDEMPOTENT)}
    )

    outcome = await harness.sequential([("1", "b", {})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.OUTPUT_SCHEMA
    assert receipt.attempts == 1
    assert engine_tools.STATE.calls["bad_output"] == 1


async def test_input_schema_failures_are_never_run(make_harness: Any) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    harness = make_harness({"e": tool("echo", retry=RETRY_3, input_schema=schema, **IDEMPOTENT)})
    run = harness.engine.open_run(harness.identity())

    receipt = await harness.engine.run_call(run, "e", {"text": 5}, call_key="1")

    assert receipt.status is Status.FAILED
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.INPUT_SCHEMA
    assert "/text" in receipt.error.message
    assert receipt.attempts == 0
    assert "echo" not in engine_tools.STATE.calls


async def test_timed_out_non_idempotent_call_is_not_retried_and_says_outcome_unknown(
    make_harness: Any,
) -> None:
    harness = make_harness({"h": tool("hang", timeout_s=0.02)})
    # The contract would refuse this retry policy; the engine must hold the line anyway.
    contract = harness.contract
    risky = replace(contract.tools["h"], retry=RetryPolicy(3, 0.0, 0.0))
    assert risky.effect is Effect.NON_IDEMPOTENT
    harness.engine = Engine(
        replace(contract, tools={"h": risky}),
        receipts=harness.receipts,
        audit=harness.audit,
    )

    outcome = await harness.sequential([("1", "h", {})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.TIMED_OUT
    assert receipt.attempts == 1
    assert receipt.error is not None
    assert receipt.error.kind is ErrorKind.TIMEOUT
    assert receipt.error.outcome_unknown is True
    assert "outcome unknown" in receipt.error.message
    assert "not retried" in receipt.error.message
    assert receipt.to_response()["error"]["outcome_unknown"] is True
    assert engine_tools.STATE.calls["h"] == 1


@pytest.mark.parametrize("effect", ["idempotent", "read"])
async def test_timed_out_idempotent_or_read_call_is_retried(make_harness: Any, effect: str) -> None:
    harness = make_harness({"h": tool("hang", timeout_s=0.02, retry=RETRY_3, effect=effect)})

    outcome = await harness.sequential([("1", "h", {})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.TIMED_OUT
    assert receipt.attempts == 3
    assert engine_tools.STATE.calls["h"] == 3
    assert len(harness.events(AuditKind.CALL_TIMED_OUT)) == 3
    assert receipt.error is not None
    assert receipt.error.outcome_unknown is (effect == "idempotent")


async def test_no_retry_when_the_backoff_would_outlast_the_deadline(make_harness: Any) -> None:
    retry = {"max_attempts": 5, "backoff_s": 60.0, "backoff_max_s": 60.0}
    harness = make_harness({"f": tool("fail", retry=retry, **IDEMPOTENT)}, rng=_MaxRandom())

    outcome = await harness.sequential([("1", "f", {"message": "x"})], deadline_s=30)

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert receipt.attempts == 1


class _MaxRandom(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return b
