"""Control-envelope evaluation of a tool's output (spec section 7).

Only the fields the envelope names are read; anything missing or unexpected
stops (fail closed). The output itself stays the producer's truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from app.contract.compiled import ControlEnvelope, DiagnosisMapping


@dataclass(frozen=True, slots=True)
class ControlDecision:
    business_status: str | None
    decision: Literal["continue", "stop"]
    reason: str
    diagnosis: dict[str, Any]
    handoff: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "business_status": self.business_status,
            "decision": self.decision,
            "reason": self.reason,
            "diagnosis": dict(self.diagnosis),
            "handoff": dict(self.handoff),
        }


def evaluate_control(envelope: ControlEnvelope, output: Any) -> ControlDecision:
    field = envelope.status_field
    if not isinstance(output, Mapping):
        return ControlDecision(
            business_status=None,
            decision="stop",
            reason=f"output is {_json_type(output)}, not an object; "
            f"status field {field!r} cannot be read",
            diagnosis={},
            handoff={},
        )
    diagnosis = _diagnosis(envelope.diagnosis, output)
    handoff = {name: output[name] for name in envelope.handoff_fields if name in output}
    status: str | None = None
    decision: Literal["continue", "stop"] = "stop"
    if field not in output:
        reason = f"status field {field!r} is missing from the output"
    elif not isinstance(output[field], str):
        reason = f"status field {field!r} is {_json_type(output[field])}, not a string"
    else:
        status = output[field]
        is_continue = status in envelope.continue_statuses
        is_stop = status in envelope.stop_statuses
        if is_continue and is_stop:
            reason = f"status {status!r} is declared both a continue and a stop status"
        elif is_continue:
            decision = "continue"
            reason = f"status {status!r} is a continue status"
        elif is_stop:
            reason = f"status {status!r} is a stop status"
        else:
            reason = f"status {status!r} is neither a continue nor a stop status"
    return ControlDecision(status, decision, reason, diagnosis, handoff)


def _diagnosis(mapping: DiagnosisMapping | None, output: Mapping[str, Any]) -> dict[str, Any]:
    if mapping is None:
        return {}
    # Listed fields first so a role key is never shadowed by a same-named field.
    roles: list[tuple[str, str | None]] = [(name, name) for name in mapping.fields]
    roles += [
        ("ready", mapping.ready_field),
        ("reason_code", mapping.reason_code_field),
        ("failure_kind", mapping.failure_kind_field),
        ("facts", mapping.facts_field),
    ]
    return {role: output[name] for role, name in roles if name is not None and name in output}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return f"a {type(value).__name__}"
