"""A router run's decisions in a comparable form, and how two runs' decisions differ.

The trail of a run is read from what it recorded: its decision events (audit
rows, or the events a replay kept as it ran), its receipts, its outcome and the
roles of its model requests (its recorded replies). Per call key: the tool, the
decision (`admitted`, `rejected`, `denied`, `confirmation`), why (the rejection's
kind, the guardrail) and the receipt's status. Then the final-answer and
completion checks in order, and the outcome's status, stop, turns and attempts.

Differences are named (`kind`), each with what was recorded and what the replay
did, and a sentence:

    call_refused          admitted when recorded, rejected or denied now
    call_admitted         rejected or denied when recorded, admitted now
    decision_changed      another refusal, or a confirmation where there was none
    tool_changed          the same call key names another tool
    call_missing          a recorded call the replay never made
    call_added            a call the recording does not have
    receipt_changed       the same admitted call, another receipt status
    check_changed         a final-answer or completion check judged otherwise
    stop_changed          another status or stopped_by
    turns_changed         another number of router turns or completion attempts
    reply_missing         the replay asked for more replies than were recorded
    replies_unused        recorded replies the replay never asked for
    reply_role_changed    a router reply served to the final writer, or the reverse

A replay that pauses for confirmation where the recording did too (the same call
keys, each of which asked a person) stops there: what followed the person's
decision is not replayed, so the recording is compared up to that pause
(`until_same_pause`), and the pause is what the replay reports. A pause where the
recording asked nobody is a difference like any other (`decision_changed`,
`stop_changed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_DECISIONS = {
    "router.call_admitted": "admitted",
    "router.call_rejected": "rejected",
    "router.call_denied": "denied",
    "router.confirmation_requested": "confirmation",
}
_CHECKS = {"router.final_checked": "final", "router.completion_checked": "completion"}
_REFUSED = ("rejected", "denied")


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    detail: Mapping[str, Any]
    tool: str | None
    call_key: str | None


@dataclass
class Trail:
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    outcome: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": [{"call_key": key, **call} for key, call in self.calls.items()],
            "checks": list(self.checks),
            "roles": list(self.roles),
            "outcome": dict(self.outcome),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Trail:
        calls = {
            str(call["call_key"]): {k: v for k, v in call.items() if k != "call_key"}
            for call in data["calls"]
        }
        return cls(calls, list(data["checks"]), list(data["roles"]), dict(data["outcome"]))


def trail_of(
    events: Iterable[Event],
    receipts: Iterable[Mapping[str, Any]],
    outcome: Mapping[str, Any],
    replies: Sequence[Mapping[str, Any]],
) -> Trail:
    trail = Trail()
    for event in events:
        decision = _DECISIONS.get(event.kind)
        if decision is not None and event.call_key is not None:
            trail.calls[event.call_key] = {
                "tool": event.tool or _text(event.detail.get("name")),
                "decision": decision,
                "why": _why(event),
                "status": None,
            }
            continue
        check = _CHECKS.get(event.kind)
        if check is not None:
            trail.checks.append(f"{check}:{'ok' if event.detail.get('ok') else 'failed'}")
    for receipt in receipts:
        call = trail.calls.get(str(receipt.get("call_key")))
        if call is not None and receipt.get("parent_receipt_id") is None:
            call["status"] = receipt.get("status")
    trail.roles = [str(reply.get("role")) for reply in replies]
    trail.outcome = {
        "status": outcome.get("status"),
        "stopped_by": outcome.get("stopped_by"),
        "turns": outcome.get("turns"),
        "attempts": outcome.get("attempts"),
    }
    return trail


def _why(event: Event) -> str | None:
    detail = event.detail
    if event.kind == "router.call_rejected":
        return _text(detail.get("kind"))
    if event.kind == "router.call_denied":
        guardrail = detail.get("guardrail")
        return f"guardrail {guardrail}" if guardrail else "confirmation"
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def until_same_pause(recorded: Trail, replayed: Trail) -> tuple[Trail, list[str]]:
    """The recorded trail as far as the replay got, and the call keys it paused at,
    when the replay paused where the recording asked a person too; otherwise the
    recorded trail whole and no keys."""
    if replayed.outcome.get("status") != "pending":
        return recorded, []
    paused = [
        key
        for key, call in replayed.calls.items()
        if call["decision"] == "confirmation" and call.get("status") is None
    ]
    if not paused or not all(_asked_a_person(recorded.calls.get(key)) for key in paused):
        return recorded, []
    keys = list(recorded.calls)
    last = max(keys.index(key) for key in paused)
    calls = {
        key: {**call, "decision": "confirmation", "why": None, "status": None}
        if key in paused
        else call
        for index, (key, call) in enumerate(recorded.calls.items())
        if index <= last or key in replayed.calls
    }
    cut = Trail(
        calls,
        recorded.checks[: len(replayed.checks)],
        recorded.roles[: len(replayed.roles)],
        dict(replayed.outcome),
    )
    return cut, paused


def _asked_a_person(call: Mapping[str, Any] | None) -> bool:
    """Whether the recorded call waited for confirmation (still waiting, approved, or
    refused by the decider)."""
    if call is None:
        return False
    return call["decision"] == "confirmation" or (
        call["decision"] == "denied" and call.get("why") == "confirmation"
    )


def differences(recorded: Trail, replayed: Trail) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    found.extend(_reply_differences(recorded.roles, replayed.roles))
    for key in [*recorded.calls, *(k for k in replayed.calls if k not in recorded.calls)]:
        found.extend(_call_differences(key, recorded.calls.get(key), replayed.calls.get(key)))
    if recorded.checks != replayed.checks:
        found.append(
            _difference(
                "check_changed",
                None,
                recorded.checks,
                replayed.checks,
                "the final-answer and completion checks judged otherwise",
            )
        )
    was, now = recorded.outcome, replayed.outcome
    if (was.get("status"), was.get("stopped_by")) != (now.get("status"), now.get("stopped_by")):
        found.append(
            _difference(
                "stop_changed",
                None,
                {"status": was.get("status"), "stopped_by": was.get("stopped_by")},
                {"status": now.get("status"), "stopped_by": now.get("stopped_by")},
                f"the run ended {_ending(now)} where it ended {_ending(was)}",
            )
        )
    if (was.get("turns"), was.get("attempts")) != (now.get("turns"), now.get("attempts")):
        found.append(
            _difference(
                "turns_changed",
                None,
                {"turns": was.get("turns"), "attempts": was.get("attempts")},
                {"turns": now.get("turns"), "attempts": now.get("attempts")},
                f"{now.get('turns')} router turns and {now.get('attempts')} attempts, "
                f"recorded {was.get('turns')} and {was.get('attempts')}",
            )
        )
    return found


def _reply_differences(recorded: list[str], replayed: list[str]) -> list[dict[str, Any]]:
    found = []
    for index, (was, now) in enumerate(zip(recorded, replayed, strict=False)):
        if was != now:
            found.append(
                _difference(
                    "reply_role_changed",
                    None,
                    {"reply": index + 1, "role": was},
                    {"reply": index + 1, "role": now},
                    f"reply {index + 1}, recorded for the {was} model, went to the {now} model",
                )
            )
            break
    if len(replayed) > len(recorded):
        found.append(
            _difference(
                "reply_missing",
                None,
                {"replies": len(recorded)},
                {"asked": len(replayed)},
                f"the replay asked for reply {len(recorded) + 1} ({replayed[len(recorded)]} "
                f"model); the recording holds {len(recorded)}",
            )
        )
    elif len(replayed) < len(recorded):
        found.append(
            _difference(
                "replies_unused",
                None,
                {"replies": len(recorded)},
                {"asked": len(replayed)},
                f"{len(recorded) - len(replayed)} recorded replies were never asked for",
            )
        )
    return found


def _call_differences(
    key: str, was: Mapping[str, Any] | None, now: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    if now is None:
        assert was is not None
        return [
            _difference(
                "call_missing", key, was, None, f"{key} ({was['tool']}) was not proposed again"
            )
        ]
    if was is None:
        return [_difference("call_added", key, None, now, f"{key} ({now['tool']}) is new")]
    found = []
    if was["tool"] != now["tool"]:
        found.append(
            _difference(
                "tool_changed",
                key,
                was["tool"],
                now["tool"],
                f"{key} names {now['tool']} where it named {was['tool']}",
            )
        )
    decided = (was["decision"], was.get("why")), (now["decision"], now.get("why"))
    if decided[0] != decided[1]:
        if was["decision"] == "admitted" and now["decision"] in _REFUSED:
            kind = "call_refused"
        elif was["decision"] in _REFUSED and now["decision"] == "admitted":
            kind = "call_admitted"
        else:
            kind = "decision_changed"
        found.append(
            _difference(
                kind,
                key,
                _decision(was),
                _decision(now),
                f"{key} ({now['tool']}) is {_said(now)}; it was {_said(was)}",
            )
        )
    elif was.get("status") != now.get("status"):
        found.append(
            _difference(
                "receipt_changed",
                key,
                was.get("status"),
                now.get("status"),
                f"{key} ({now['tool']}) ended {now.get('status')}, recorded {was.get('status')}",
            )
        )
    return found


def _decision(call: Mapping[str, Any]) -> dict[str, Any]:
    return {"decision": call["decision"], "why": call.get("why")}


def _said(call: Mapping[str, Any]) -> str:
    why = call.get("why")
    return f"{call['decision']} ({why})" if why else str(call["decision"])


def _ending(outcome: Mapping[str, Any]) -> str:
    stopped_by = outcome.get("stopped_by")
    status = outcome.get("status")
    return f"{status} ({stopped_by})" if stopped_by else str(status)


def _difference(
    kind: str, call_key: str | None, recorded: Any, replayed: Any, message: str
) -> dict[str, Any]:
    return {
        "kind": kind,
        "call_key": call_key,
        "recorded": recorded,
        "replayed": replayed,
        "message": message,
    }
