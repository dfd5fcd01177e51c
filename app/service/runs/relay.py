"""A run's events, relayed to the other processes that follow it (PostgreSQL).

A process streaming a run that executes here asks this one to relay it
(`watch`, from `RunReplicas`). From then until the run ends here, each
committed batch's receipts of that run go out as a notice of their `seq`
numbers (never their bodies: the follower reads the stored, redacted rows)
and the run's end as a notice of its status, after the end is stored. Runs
nobody follows cost a set lookup per batch; with none followed, nothing.

A `toolloop worker` cannot know when a run on Temporal ends (another worker may
record it), so it relays such a run for a lease (`watch(run_id, lease_s)`)
that the follower renews while it follows (`app.temporal.relayed_runs`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import orjson

from app.service.runs.events import RunEventHub

RUNS_CHANNEL = "toolloop_runs"
# A notice's seq numbers: at most 8 bytes each in its JSON, well inside PostgreSQL's
# 8000-byte payload.
SEQS_PER_NOTICE = 800
# How long a worker relays a run on Temporal after a follower's last watch; the
# follower watches again every `ORCHESTRATED_WATCH_RENEW_S` while it follows.
ORCHESTRATED_WATCH_LEASE_S = 60.0
ORCHESTRATED_WATCH_RENEW_S = ORCHESTRATED_WATCH_LEASE_S / 3


class NoticeSender(Protocol):
    def send(self, channel: str, payload: str) -> None: ...


def notice(message: Mapping[str, Any]) -> str:
    return orjson.dumps(message).decode()


class RunEventRelay:
    """The supervisor's `RunEnds` and the writer's receipt listener, on top of the hub."""

    def __init__(self, hub: RunEventHub, notices: NoticeSender) -> None:
        self._hub = hub
        self._notices = notices
        # Run id -> until when (monotonic seconds) it is relayed; inf: until its end here.
        self._watched: dict[str, float] = {}

    def watch(self, run_id: str, lease_s: float | None = None) -> None:
        """Relay the run from now until its end here, or for `lease_s` when given
        (a watch again renews it)."""
        now = time.monotonic()
        for expired in [run for run, until in self._watched.items() if until < now]:
            del self._watched[expired]
        self._watched[run_id] = math.inf if lease_s is None else now + lease_s

    def is_watched(self, run_id: str) -> bool:
        return self._watched.get(run_id, -math.inf) >= time.monotonic()

    def publish_receipts(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """The writer's after-commit listener."""
        if not self._watched:
            return
        seqs: dict[str, list[int]] = {}
        for row in rows:
            if row["run_id"] in self._watched:
                seqs.setdefault(row["run_id"], []).append(row["seq"])
        if not seqs:
            return
        now = time.monotonic()
        for run_id, run_seqs in seqs.items():
            if self._watched[run_id] < now:
                del self._watched[run_id]
                continue
            for chunk in _chunks(run_seqs, SEQS_PER_NOTICE):
                message = {"op": "receipts", "run": run_id, "seqs": chunk}
                self._notices.send(RUNS_CHANNEL, notice(message))

    def end(self, run_id: str, status: str) -> None:
        self._hub.end(run_id, status)
        if self._watched.pop(run_id, -math.inf) >= time.monotonic():
            message = {"op": "end", "run": run_id, "status": status}
            self._notices.send(RUNS_CHANNEL, notice(message))


def _chunks(values: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
