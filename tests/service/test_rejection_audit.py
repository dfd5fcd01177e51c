"""The rejection audit: no request string kept raw, and rows bounded per caller."""

from __future__ import annotations

import hashlib
from typing import Any

from app.engine.preflight import PlanProblem, ProblemCode
from app.service.rejection_audit import RejectionAudit, rejection_detail, safe_text


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _audit(rows: list[dict[str, Any]], clock: Clock, **options: Any) -> RejectionAudit:
    return RejectionAudit(rows.append, "plan.rejected", clock=clock, **options)


def test_a_caller_gets_its_first_rows_in_full_then_one_row_counting_the_rest() -> None:
    rows: list[dict[str, Any]] = []
    clock = Clock()
    audit = _audit(rows, clock, full_rows=3, window_s=60.0)

    for number in range(10):
        audit.record("alice", {"n": number})
    audit.record("bob", {"n": 0})
    assert [(row["kind"], row["caller"]) for row in rows] == [
        *[("plan.rejected", "alice")] * 3,
        ("plan.rejected", "bob"),
    ]

    clock.now += 60.0
    audit.record("alice", {"n": 10})

    assert [(row["kind"], row["caller"]) for row in rows[4:]] == [
        ("plan.rejected.suppressed", "alice"),
        ("plan.rejected", "alice"),
    ]
    assert rows[4]["detail"]["suppressed"] == 7
    assert rows[4]["run_id"] is None


def test_closing_writes_what_each_window_suppressed() -> None:
    rows: list[dict[str, Any]] = []
    audit = _audit(rows, Clock(), full_rows=1)
    for caller in (None, None, "bob", "carol", "carol", "carol"):
        audit.record(caller, {})

    audit.close()

    suppressed = {
        row["caller"]: row["detail"]["suppressed"]
        for row in rows
        if row["kind"] == "plan.rejected.suppressed"
    }
    assert suppressed == {None: 1, "carol": 2}
    audit.close()
    assert len(rows) == 3 + 2


def test_the_callers_tracked_are_bounded() -> None:
    rows: list[dict[str, Any]] = []
    audit = _audit(rows, Clock(), full_rows=1, max_callers=2)
    for caller in ("a", "a", "b", "c"):
        audit.record(caller, {})

    # Tracking "c" closed the oldest window, "a"'s, which had suppressed one.
    assert [(row["kind"], row["caller"]) for row in rows] == [
        ("plan.rejected", "a"),
        ("plan.rejected", "b"),
        ("plan.rejected.suppressed", "a"),
        ("plan.rejected", "c"),
    ]


def test_the_detail_keeps_no_request_string_raw() -> None:
    hostile = "evil\x00\x1b[2J\ud800" + "x" * 500
    problems = [
        PlanProblem("/owner", f"unknown owner {hostile!r}", ProblemCode.UNKNOWN_OWNER),
        *(
            PlanProblem(f"/calls/{n}/args/{hostile}", hostile, ProblemCode.INVALID_ARGS)
            for n in range(12)
        ),
    ]

    detail = rejection_detail(hostile, {"worker-a"}, problems)

    assert (
        detail["owner_sha256"] == hashlib.sha256(hostile.encode(errors="surrogatepass")).hexdigest()
    )
    assert detail["owner_chars"] == len(hostile)
    assert "owner" not in detail
    assert detail["problem_count"] == 13
    assert detail["problem_codes"] == {"unknown_owner": 1, "invalid_args": 12}
    assert len(detail["problems"]) == 10
    pointer = detail["problems"][1]["pointer"]
    assert pointer.startswith("/calls/0/args/evil\\x00\\x1b[2J\\ud800xxx")
    assert len(pointer) == 200
    assert hostile not in str(detail)
    assert "message" not in detail["problems"][0]
    str(detail).encode()  # storable: no lone surrogate left


def test_a_declared_owner_is_kept_by_name() -> None:
    assert rejection_detail("worker-a", {"worker-a"}, [])["owner"] == "worker-a"


def test_safe_text_redacts_and_leaves_printable_text_alone() -> None:
    assert safe_text("/calls/0/args/ünï") == "/calls/0/args/ünï"
    assert "sk-" + "A" * 32 not in safe_text("/a/sk-" + "A" * 32)
