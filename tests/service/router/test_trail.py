"""A run's decisions as a trail, and the named differences between two trails."""

from __future__ import annotations

from typing import Any

from app.service.router.trail import Event, Trail, differences, trail_of, until_same_pause

DONE = {"status": "done", "stopped_by": "", "turns": 2, "attempts": 1}


def trail(*events: Event, receipts: list[dict[str, Any]] | None = None, **outcome: Any) -> Trail:
    roles = outcome.pop("roles", ["router", "router", "final"])
    return trail_of(events, receipts or [], {**DONE, **outcome}, [{"role": r} for r in roles])


def admitted(call_key: str, tool: str = "lookup") -> Event:
    return Event("router.call_admitted", {}, tool, call_key)


def kinds(found: list[dict[str, Any]]) -> list[str]:
    return [d["kind"] for d in found]


def test_the_trail_holds_each_calls_last_decision_and_its_receipt() -> None:
    got = trail(
        admitted("s1", "normalize"),
        Event("router.call_rejected", {"kind": "unknown_tool", "name": "ghost"}, None, "t1c0"),
        Event("router.call_denied", {"guardrail": "no_bulk"}, "delete", "t1c1"),
        Event("router.confirmation_requested", {}, "publish", "t2c0"),
        Event("router.call_denied", {"guardrail": None}, "publish", "t2c0"),
        Event("router.completion_checked", {"ok": False}, None, None),
        Event("router.model_turn", {"role": "router"}, None, None),
        receipts=[
            {"call_key": "s1", "status": "succeeded"},
            {"call_key": "s1", "status": "failed", "parent_receipt_id": "r0"},
            {"call_key": "t1c1", "status": "denied"},
        ],
    )
    assert got.to_json()["calls"] == [
        {
            "call_key": "s1",
            "tool": "normalize",
            "decision": "admitted",
            "why": None,
            "status": "succeeded",
        },
        {
            "call_key": "t1c0",
            "tool": "ghost",
            "decision": "rejected",
            "why": "unknown_tool",
            "status": None,
        },
        {
            "call_key": "t1c1",
            "tool": "delete",
            "decision": "denied",
            "why": "guardrail no_bulk",
            "status": "denied",
        },
        {
            "call_key": "t2c0",
            "tool": "publish",
            "decision": "denied",
            "why": "confirmation",
            "status": None,
        },
    ]
    assert got.checks == ["completion:failed"]
    assert Trail.from_json(got.to_json()) == got


def test_the_same_decisions_have_no_difference() -> None:
    assert differences(trail(admitted("t1c0")), trail(admitted("t1c0"))) == []


def test_a_call_now_refused_is_named_with_why() -> None:
    now = Event("router.call_denied", {"guardrail": "no_lookups"}, "lookup", "t1c0")
    (found,) = differences(trail(admitted("t1c0")), trail(now))
    assert found["kind"] == "call_refused"
    assert found["call_key"] == "t1c0"
    assert found["replayed"] == {"decision": "denied", "why": "guardrail no_lookups"}
    assert "guardrail no_lookups" in found["message"]


def test_each_kind_of_difference_is_named() -> None:
    recorded = trail(
        admitted("t1c0"),
        Event("router.call_rejected", {"kind": "invalid_arguments"}, "echo", "t1c1"),
        admitted("t1c2", "echo"),
        admitted("t1c3"),
        Event("router.final_checked", {"ok": True}, None, None),
        receipts=[{"call_key": "t1c3", "status": "succeeded"}],
    )
    replayed = trail(
        admitted("t1c0", "echo"),
        admitted("t1c1", "echo"),
        admitted("t1c3"),
        admitted("t2c0"),
        receipts=[{"call_key": "t1c3", "status": "failed"}],
        status="incomplete",
        stopped_by="budget:max_turns",
        turns=6,
        roles=["router", "final", "router", "router"],
    )
    assert kinds(differences(recorded, replayed)) == [
        "reply_role_changed",
        "reply_missing",
        "tool_changed",
        "call_admitted",
        "call_missing",
        "receipt_changed",
        "call_added",
        "check_changed",
        "stop_changed",
        "turns_changed",
    ]


def test_replies_left_over_are_named() -> None:
    found = differences(trail(), trail(roles=["router"]))
    assert kinds(found) == ["replies_unused"]
    assert found[0]["message"] == "2 recorded replies were never asked for"


PAUSED = {"status": "pending", "stopped_by": "confirmation", "turns": 1, "attempts": 0}


def asked(call_key: str, tool: str = "publish") -> Event:
    return Event("router.confirmation_requested", {}, tool, call_key)


def test_a_replay_paused_where_a_person_was_asked_is_compared_up_to_that_pause() -> None:
    recorded = trail(
        admitted("t1c0"),
        asked("t1c1"),
        Event("router.call_denied", {"guardrail": None}, "publish", "t1c1"),
        admitted("t2c0"),
        Event("router.completion_checked", {"ok": True}, None, None),
        receipts=[{"call_key": "t1c1", "status": "denied"}],
    )
    replayed = trail(admitted("t1c0"), asked("t1c1"), roles=["router"], **PAUSED)

    cut, paused = until_same_pause(recorded, replayed)

    assert paused == ["t1c1"]
    assert differences(cut, replayed) == []
    # Without the cut, what followed the decision would read as differences.
    assert "stop_changed" in kinds(differences(recorded, replayed))


def test_a_pause_where_the_recording_asked_nobody_is_a_difference() -> None:
    recorded = trail(admitted("t1c0"), admitted("t1c1", "publish"))
    replayed = trail(admitted("t1c0"), asked("t1c1"), roles=["router"], **PAUSED)

    cut, paused = until_same_pause(recorded, replayed)

    assert (cut, paused) == (recorded, [])
    found = kinds(differences(cut, replayed))
    assert "decision_changed" in found
    assert "stop_changed" in found
    # Another tool at the same key is a difference even at the same pause.
    other = trail(asked("t1c1", "announce"), roles=["router"], **PAUSED)
    cut, paused = until_same_pause(trail(asked("t1c1")), other)
    assert paused == ["t1c1"]
    assert kinds(differences(cut, other)) == ["tool_changed"]
