"""A plan run that waits for confirmations: what it keeps, and how it is paused.

When every chain of a plan (the sequential plan, or each lane) finished or waits
at the confirmation gate, the run moves to `pending` with, in one transaction:
one confirmation row per waiting call (its exact arguments, until decided) and a
checkpoint: the plan's shape (owner, limits, the calls' keys and tools, the
caller's context, redacted) and the exact arguments of the calls after a waiting
one in its chain, which must still run once it is decided. Nothing else of the
plan is kept (docs/decisions.md, "pending confirmation arguments").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.contract.compiled import Contract
from app.engine import ParallelPlan, SequentialPlan, WaitingCall
from app.foundation.redaction import DEFAULT_REDACTOR, Redactor
from app.observability.confirmations import record_confirmation
from app.service.errors import StorageUnavailable
from app.store.journal.writer import GroupCommitWriter
from app.store.repositories.router_runs import RouterRunRepository

Args = Sequence[Mapping[str, Any]]
PLAN_CHECKPOINT = "plan"


def chains_of(plan: SequentialPlan | ParallelPlan) -> list[tuple[str | None, list[Any]]]:
    """(item_key, calls) of each chain, in order."""
    if isinstance(plan, SequentialPlan):
        return [(None, list(plan.calls))]
    return [(lane.item_key, list(lane.calls)) for lane in plan.lanes]


def plan_checkpoint(
    plan: SequentialPlan | ParallelPlan,
    admitted: Sequence[Args],
    waiting: Sequence[WaitingCall],
) -> dict[str, Any]:
    """The checkpoint of a plan run paused at `waiting` (`admitted`: per chain)."""
    chains = chains_of(plan)
    firsts = list(accumulate((len(calls) for _, calls in chains), initial=0))
    index_of = {item_key: index for index, (item_key, _) in enumerate(chains)}
    kept: dict[str, Any] = {}
    for call in waiting:
        chain = index_of[call.item_key]
        first = firsts[chain]
        for offset in range(call.seq - first + 1, len(chains[chain][1])):
            kept[str(first + offset)] = dict(admitted[chain][offset])
    return {
        "type": PLAN_CHECKPOINT,
        "kind": "sequential" if isinstance(plan, SequentialPlan) else "parallel",
        "owner": plan.owner,
        "max_concurrency": getattr(plan, "max_concurrency", None),
        "deadline_s": plan.deadline_s,
        "context": DEFAULT_REDACTOR.redact(dict(plan.context)),
        "chains": [
            {"item_key": item_key, "calls": [[call.call_key, call.tool] for call in calls]}
            for item_key, calls in chains
        ],
        "args": kept,
    }


def confirmation_rows(waiting: Sequence[WaitingCall], contract_hash: str) -> list[dict[str, Any]]:
    return [
        {
            "id": call.confirmation_id,
            "call_id": None,
            "call_key": call.call_key,
            "item_key": call.item_key,
            "seq": call.seq,
            "tool": call.tool,
            "args": dict(call.args),
            "args_digest": call.args_digest,
            "contract_hash": contract_hash,
        }
        for call in waiting
    ]


def redacted_args(contract: Contract, tool_id: str, args: Mapping[str, Any]) -> Any:
    """Arguments as they may be shown or stored: the tool's redaction, as its receipts'."""
    tool = contract.tools.get(tool_id)
    redactor = Redactor(tool.redact) if tool is not None and tool.redact else DEFAULT_REDACTOR
    return redactor.redact(dict(args))


async def record_plan_pause(
    sessions: async_sessionmaker[AsyncSession],
    writer: GroupCommitWriter,
    contract: Contract,
    *,
    run_id: str,
    caller: str | None,
    call_count: int,
    checkpoint: dict[str, Any],
    waiting: Sequence[WaitingCall],
) -> None:
    """Move the run to `pending` with its checkpoint and confirmations; audit each
    request (`confirmation.requested`, with the redacted arguments)."""
    try:
        async with sessions.begin() as session:
            await RouterRunRepository(session).pause(
                run_id,
                outcome=None,
                call_count=call_count,
                checkpoint=checkpoint,
                confirmations=confirmation_rows(waiting, contract.hash),
            )
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"the run's pause could not be recorded: {exc}") from exc
    record_confirmation("requested", len(waiting))
    now = datetime.now(UTC)
    for call in waiting:
        writer.emit_row(
            {
                "run_id": run_id,
                "at": now,
                "kind": "confirmation.requested",
                "caller": caller,
                "tool": call.tool,
                "call_key": call.call_key,
                "item_key": call.item_key,
                "detail": {
                    "confirmation_id": call.confirmation_id,
                    "seq": call.seq,
                    "args_digest": call.args_digest,
                    "args": redacted_args(contract, call.tool, call.args),
                },
            }
        )
    await writer.flush()
