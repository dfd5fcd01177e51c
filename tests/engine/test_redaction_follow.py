"""A redacted argument's value is redacted wherever its call repeats it, in every stored copy."""

from __future__ import annotations

from typing import Any

import orjson

from app.engine.ports import AuditKind
from app.engine.receipt import Status
from app.foundation.redaction import DEFAULT_REDACTOR, REDACTED, Redactor
from app.store.journal.events import audit_event_rows
from tests.engine.harness import tool

SECRET = "hunter2-correct-horse"
ENVELOPE = {
    "version": 1,
    "role": "production",
    "graph": {"status_field": "status", "continue_statuses": ["ok"], "stop_statuses": ["no"]},
    "handoff_fields": ["args"],
}


async def test_an_output_repeating_a_redacted_argument_is_stored_without_it(
    make_harness: Any,
) -> None:
    harness = make_harness({"e": tool("aecho", redact=["password"])})

    outcome = await harness.sequential(
        [("1", "e", {"password": SECRET, "note": f"login with {SECRET} please", "copy": SECRET})]
    )

    (receipt,) = outcome.receipts
    assert receipt.to_response()["output"]["args"]["copy"] == SECRET  # the caller's own copy
    (stored,) = harness.receipts.stored(outcome.run_id)
    assert SECRET not in orjson.dumps(stored).decode()
    assert stored["output"]["args"] == {
        "password": REDACTED,
        "note": f"login with {REDACTED} please",
        "copy": REDACTED,
    }


async def test_an_error_repeating_a_redacted_argument_is_stored_without_it(
    make_harness: Any,
) -> None:
    harness = make_harness({"l": tool("leak", redact=["note"])})

    outcome = await harness.sequential([("1", "l", {"note": SECRET})])

    (receipt,) = outcome.receipts
    assert receipt.status is Status.FAILED
    assert SECRET in receipt.to_response()["error"]["message"]
    (stored,) = harness.receipts.stored(outcome.run_id)
    assert stored["error"]["message"] == f"RuntimeError: upstream said: {REDACTED}"
    (finished,) = harness.events(AuditKind.CALL_FINISHED)
    (row,) = audit_event_rows([finished])
    assert SECRET not in orjson.dumps(row["detail"]).decode()
    assert row["detail"]["error"]["message"] == f"RuntimeError: upstream said: {REDACTED}"


async def test_a_control_envelope_repeating_a_redacted_argument_is_stored_without_it(
    make_harness: Any,
) -> None:
    harness = make_harness({"e": tool("aecho", redact=["token"], control_envelope=ENVELOPE)})

    outcome = await harness.sequential([("1", "e", {"token": SECRET, "copy": SECRET})])

    (receipt,) = outcome.receipts
    assert receipt.control is not None
    assert SECRET in orjson.dumps(receipt.control).decode()
    (stored,) = harness.receipts.stored(outcome.run_id)
    assert stored["control"] is not None
    assert SECRET not in orjson.dumps(stored["control"]).decode()


async def test_another_call_s_output_is_not_touched(make_harness: Any) -> None:
    harness = make_harness({"e": tool("aecho", redact=["password"])})

    outcome = await harness.sequential(
        [("1", "e", {"password": SECRET}), ("2", "e", {"note": SECRET})]
    )

    first, second = harness.receipts.stored(outcome.run_id)
    assert first["output"]["args"] == {"password": REDACTED}
    assert second["output"]["args"] == {"note": SECRET}


def test_short_values_are_hidden_only_where_a_string_is_exactly_them() -> None:
    redactor = Redactor(["pin"]).for_arguments({"pin": "123", "nested": {"pin": [4321, True]}})
    output = {"a": "123", "b": "a123b", "c": 4321, "d": "code 4321", "e": True, "f": 1}
    assert redactor.redact(output) == {
        "a": REDACTED,
        "b": "a123b",
        "c": REDACTED,
        "d": f"code {REDACTED}",
        "e": True,
        "f": 1,
    }


def test_without_redacted_values_the_tool_s_redactor_is_kept() -> None:
    redactor = Redactor(["password"])
    assert redactor.for_arguments({"note": "x"}) is redactor
    assert redactor.for_arguments({"password": ""}) is redactor
    assert DEFAULT_REDACTOR.for_arguments({"password": SECRET}) is DEFAULT_REDACTOR


def test_unchanged_data_keeps_its_identity() -> None:
    redactor = Redactor(["password"]).for_arguments({"password": SECRET})
    output = {"args": {"note": "nothing here"}, "list": [1, "two"]}
    assert redactor.redact(output) is output
