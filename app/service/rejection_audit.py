"""The audit trace of rejected requests (plans, router runs): sanitized, and bounded
per caller.

A rejected request is the attacker's cheapest move: it runs nothing, so its audit
row must cost little and say nothing the attacker chose, raw. A row keeps the
owner only when the registry declares it (else its sha256 and length), the
number of problems and their count by code (a closed vocabulary), and the first
few problems' pointers, escaped (control characters, U+0000, lone surrogates),
redacted and truncated; never a problem's message, which quotes the request.

Per caller (the API key's name; every open-mode caller shares one), the first
`full_rows` rejections of a window of `window_s` get a row each; the rest are
counted, and one `<kind>.suppressed` row says how many when the caller's next
rejection opens a new window, or when the service closes. Metrics count every
rejection regardless (`toolloop_plans_rejected_total`).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.engine import PlanProblem
from app.foundation.redaction import redact_text

FULL_ROWS_PER_WINDOW = 20
WINDOW_S = 60.0
# Callers tracked at once; the least recently opened window is closed beyond it.
MAX_CALLERS = 10_000
SAMPLED_PROBLEMS = 10
MAX_POINTER_CHARS = 200

EmitRow = Callable[[dict[str, Any]], None]


def safe_text(text: str, limit: int = MAX_POINTER_CHARS) -> str:
    """`text` as an audit row may keep it: redacted, every non-printable character
    (controls, U+0000, lone surrogates) written as an escape, at most `limit` chars."""
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    text = redact_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rejection_detail(
    owner: str, known_owners: Collection[str], problems: Sequence[PlanProblem]
) -> dict[str, Any]:
    """What a rejection's audit row says of the request and its problems."""
    detail: dict[str, Any] = {}
    if owner in known_owners:
        detail["owner"] = owner
    else:
        detail["owner_sha256"] = hashlib.sha256(owner.encode(errors="surrogatepass")).hexdigest()
        detail["owner_chars"] = len(owner)
    detail["problem_count"] = len(problems)
    detail["problem_codes"] = dict(Counter(str(problem.code) for problem in problems))
    detail["problems"] = [
        {"pointer": safe_text(problem.pointer), "code": str(problem.code)}
        for problem in problems[:SAMPLED_PROBLEMS]
    ]
    return detail


@dataclass(slots=True)
class _Window:
    opened: float
    first_at: datetime
    rows: int = 0
    suppressed: int = 0


class RejectionAudit:
    """Emits `kind` rows through `emit` (the writer's `emit_row`), bounded per caller."""

    def __init__(
        self,
        emit: EmitRow,
        kind: str,
        *,
        full_rows: int = FULL_ROWS_PER_WINDOW,
        window_s: float = WINDOW_S,
        max_callers: int = MAX_CALLERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._emit = emit
        self._kind = kind
        self._full_rows = full_rows
        self._window_s = window_s
        self._max_callers = max_callers
        self._clock = clock
        self._windows: dict[str | None, _Window] = {}

    def record(self, caller: str | None, detail: dict[str, Any]) -> None:
        now = self._clock()
        window = self._windows.get(caller)
        if window is None or now - window.opened >= self._window_s:
            if window is not None:
                self._close(caller, window)
            window = self._open(caller, now)
        if window.rows < self._full_rows:
            window.rows += 1
            self._emit(_row(self._kind, caller, detail))
        else:
            window.suppressed += 1

    def close(self) -> None:
        """Say what every open window suppressed (the service is closing)."""
        windows, self._windows = self._windows, {}
        for caller, window in windows.items():
            self._close(caller, window)

    def _open(self, caller: str | None, now: float) -> _Window:
        self._windows.pop(caller, None)
        if len(self._windows) >= self._max_callers:
            oldest = next(iter(self._windows))
            self._close(oldest, self._windows.pop(oldest))
        window = _Window(opened=now, first_at=_now())
        self._windows[caller] = window
        return window

    def _close(self, caller: str | None, window: _Window) -> None:
        if window.suppressed:
            detail = {
                "suppressed": window.suppressed,
                "since": window.first_at.isoformat(),
                "full_rows_per_window": self._full_rows,
                "window_s": self._window_s,
            }
            self._emit(_row(f"{self._kind}.suppressed", caller, detail))


def _row(kind: str, caller: str | None, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": None,
        "at": _now(),
        "kind": kind,
        "caller": caller,
        "tool": None,
        "call_key": None,
        "item_key": None,
        "detail": detail,
    }


def _now() -> datetime:
    return datetime.now(UTC)
