"""A guardrail run over stored calls: what it would have denied.

The calls are the router's, as its decision audit keeps them: each admitted or
denied call's tool and arguments, redacted and shortened as stored. Plan calls
keep no arguments at rest, so they are not replayed here. A call whose stored
arguments were shortened is counted as unreadable, not guessed at. The
guardrail gets what it gets live (`{"tool", "args", "owner", "run_id"}`), with
the redacted arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract.compiled import PolicyCallable
from app.router.guardrails import judge
from app.store.repositories.audit import AuditRepository, StoredAuditEvent

CALL_KINDS = ("router.call_admitted", "router.call_denied")


@dataclass(frozen=True, slots=True)
class Finding:
    run_id: str
    call_key: str | None
    tool: str | None
    at: datetime
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "call_key": self.call_key,
            "tool": self.tool,
            "at": self.at.isoformat(),
            "reason": self.reason,
        }


@dataclass(slots=True)
class BacktestReport:
    guardrail: str
    since: datetime
    until: datetime | None
    calls: int = 0
    unreadable: int = 0
    denied: list[Finding] = field(default_factory=list)
    failed: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "guardrail": self.guardrail,
            "since": self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
            "calls": self.calls,
            "unreadable": self.unreadable,
            "would_deny": len(self.denied),
            "failed": len(self.failed),
            "denied": [finding.to_json() for finding in self.denied],
            "failures": [finding.to_json() for finding in self.failed],
        }


async def backtest(
    sessions: async_sessionmaker[AsyncSession],
    guardrail: PolicyCallable,
    *,
    since: datetime,
    until: datetime | None,
    timeout_s: float,
) -> BacktestReport:
    report = BacktestReport(guardrail.name, since, until)
    after_row: int | None = 0
    while after_row is not None:
        async with sessions() as session:
            events, after_row = await AuditRepository(session).events_between(
                CALL_KINDS, since=since, until=until, after_row=after_row
            )
        for owner, event in events:
            await _judge_one(report, guardrail, owner, event, timeout_s)
    return report


async def _judge_one(
    report: BacktestReport,
    guardrail: PolicyCallable,
    owner: str,
    event: StoredAuditEvent,
    timeout_s: float,
) -> None:
    args = _stored_args(event.detail.get("args"))
    if args is None or event.run_id is None:
        report.unreadable += 1
        return
    report.calls += 1
    call = {"tool": event.tool, "args": args, "owner": owner, "run_id": event.run_id}
    verdict = await judge(guardrail, call, timeout_s)
    if verdict.reason is None:
        return
    finding = Finding(event.run_id, event.call_key, event.tool, event.at, verdict.reason)
    (report.failed if verdict.failed else report.denied).append(finding)


def _stored_args(shown: Any) -> dict[str, Any] | None:
    if not isinstance(shown, str):
        return None
    try:
        parsed = orjson.loads(shown)
    except orjson.JSONDecodeError:
        return None  # shortened when stored
    return parsed if isinstance(parsed, dict) else None
