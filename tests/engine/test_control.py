from __future__ import annotations

from typing import Any

import pytest

from app.contract.compiled import ControlEnvelope, DiagnosisMapping
from app.engine.control_envelope import ControlDecision, evaluate_control

DIAGNOSIS = DiagnosisMapping(
    ready_field="diagnosis_ready",
    reason_code_field="reason_code",
    failure_kind_field="failure_kind",
    facts_field="diagnosis_facts",
    fields=("errors", "warnings"),
)


def envelope(
    diagnosis: DiagnosisMapping | None = DIAGNOSIS, handoff: tuple[str, ...] = ()
) -> ControlEnvelope:
    return ControlEnvelope(
        version=1,
        role="production",
        status_field="status",
        continue_statuses=frozenset({"success", "partial"}),
        stop_statuses=frozenset({"failed"}),
        diagnosis=diagnosis,
        handoff_fields=handoff,
    )


@pytest.mark.parametrize("status", ["success", "partial"])
def test_continue_status_continues(status: str) -> None:
    decision = evaluate_control(envelope(), {"status": status})
    assert decision.decision == "continue"
    assert decision.business_status == status
    assert status in decision.reason


def test_stop_status_stops_and_names_it() -> None:
    decision = evaluate_control(envelope(), {"status": "failed"})
    assert decision.decision == "stop"
    assert decision.business_status == "failed"
    assert decision.reason == "status 'failed' is a stop status"


def test_undeclared_status_fails_closed() -> None:
    decision = evaluate_control(envelope(), {"status": "SUCCESS"})
    assert decision.decision == "stop"
    assert decision.business_status == "SUCCESS"
    assert decision.reason == "status 'SUCCESS' is neither a continue nor a stop status"


def test_status_declared_both_ways_fails_closed() -> None:
    ambiguous = ControlEnvelope(
        version=1,
        role="production",
        status_field="status",
        continue_statuses=frozenset({"done"}),
        stop_statuses=frozenset({"done"}),
        diagnosis=None,
        handoff_fields=(),
    )
    decision = evaluate_control(ambiguous, {"status": "done"})
    assert decision.decision == "stop"
    assert "both" in decision.reason


def test_missing_status_field_fails_closed() -> None:
    decision = evaluate_control(envelope(), {"state": "success"})
    assert decision.decision == "stop"
    assert decision.business_status is None
    assert decision.reason == "status field 'status' is missing from the output"


@pytest.mark.parametrize(
    ("status", "kind"),
    [(None, "null"), (True, "a boolean"), (1, "a number"), (["success"], "an array")],
)
def test_non_string_status_fails_closed(status: Any, kind: str) -> None:
    decision = evaluate_control(envelope(), {"status": status})
    assert decision.decision == "stop"
    assert decision.business_status is None
    assert decision.reason == f"status field 'status' is {kind}, not a string"


@pytest.mark.parametrize(
    ("output", "kind"),
    [(None, "null"), ("success", "a string"), ([{"status": "success"}], "an array")],
)
def test_non_object_output_fails_closed(output: Any, kind: str) -> None:
    decision = evaluate_control(envelope(handoff=("next",)), output)
    assert decision == ControlDecision(
        business_status=None,
        decision="stop",
        reason=f"output is {kind}, not an object; status field 'status' cannot be read",
        diagnosis={},
        handoff={},
    )


def test_diagnosis_copies_mapped_fields_by_role() -> None:
    output = {
        "status": "failed",
        "diagnosis_ready": True,
        "reason_code": "E42",
        "failure_kind": "upstream",
        "diagnosis_facts": {"attempted": 3},
        "errors": ["boom"],
        "unrelated": "never read",
    }
    decision = evaluate_control(envelope(), output)
    assert decision.diagnosis == {
        "ready": True,
        "reason_code": "E42",
        "failure_kind": "upstream",
        "facts": {"attempted": 3},
        "errors": ["boom"],
    }


def test_diagnosis_is_kept_when_the_status_is_unusable() -> None:
    decision = evaluate_control(envelope(), {"status": 7, "reason_code": "E1"})
    assert decision.decision == "stop"
    assert decision.diagnosis == {"reason_code": "E1"}


def test_no_diagnosis_mapping_means_an_empty_diagnosis() -> None:
    decision = evaluate_control(envelope(diagnosis=None), {"status": "success", "errors": [1]})
    assert decision.diagnosis == {}


def test_role_keys_win_over_same_named_listed_fields() -> None:
    mapping = DiagnosisMapping(
        ready_field="is_ready",
        reason_code_field=None,
        failure_kind_field=None,
        facts_field=None,
        fields=("ready",),
    )
    decision = evaluate_control(envelope(mapping), {"status": "success", "is_ready": 1, "ready": 2})
    assert decision.diagnosis == {"ready": 1}


def test_handoff_copies_only_named_fields_present() -> None:
    output = {"status": "success", "next": {"id": "n1"}, "other": 1}
    decision = evaluate_control(envelope(handoff=("next", "absent")), output)
    assert decision.handoff == {"next": {"id": "n1"}}


def test_to_dict_is_plain_json() -> None:
    decision = evaluate_control(envelope(handoff=("next",)), {"status": "success", "next": 1})
    assert decision.to_dict() == {
        "business_status": "success",
        "decision": "continue",
        "reason": "status 'success' is a continue status",
        "diagnosis": {},
        "handoff": {"next": 1},
    }
