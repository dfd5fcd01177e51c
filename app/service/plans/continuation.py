"""Continuing a plan run once every call it waited on is decided.

Built from what the pause kept (`plans.pause`): the plan's shape, the decided
calls' exact arguments (their confirmation rows) and the arguments of the calls
after them, plus the run's stored receipts. Each chain reports its stored
receipts again and goes on from its first call without one, under the same
`seq`; the decided calls meet their decisions at the engine's gate (an approval
runs the call, a rejection or an expiry gives it a `denied` receipt and skips
the rest of its chain). The calls that already have receipts carry no
arguments: they never run again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any, Protocol

from app.contract.compiled import Contract
from app.engine import (
    CallError,
    CallPlace,
    ConfirmationDecision,
    ErrorKind,
    Lane,
    ParallelPlan,
    PlannedCall,
    Receipt,
    ResumePoint,
    RunIdentity,
    SequentialPlan,
    Status,
)
from app.service.errors import ConfirmationConflict
from app.service.plans.runs import ParallelRun, PlanPorts, SequentialRun
from app.store.models import Confirmation, Run
from app.store.models import Receipt as StoredReceipt

APPROVED = "approved"


class ContinuationPorts(PlanPorts, Protocol):
    """What a paused plan run goes on with: a plan run's ports, and the contract its
    stored receipts are read against (`PlanService` holds them)."""

    @property
    def contract(self) -> Contract: ...


def is_plan_checkpoint(document: Mapping[str, Any] | None) -> bool:
    return document is not None and document.get("type") == "plan"


def continued_run(
    ports: ContinuationPorts,
    run: Run,
    checkpoint: Mapping[str, Any] | None,
    decided: Sequence[Confirmation],
    rows: Sequence[StoredReceipt],
) -> SequentialRun | ParallelRun:
    """The paused run `run`, ready to go on under the supervisor. Raises
    ConfirmationConflict when its checkpoint is not a local plan run's."""
    if checkpoint is None or not is_plan_checkpoint(checkpoint):
        raise ConfirmationConflict("the paused run kept nothing to continue from")
    contract = ports.contract
    chains = [
        (chain["item_key"], [PlannedCall(key, tool) for key, tool in chain["calls"]])
        for chain in checkpoint["chains"]
    ]
    args: dict[int, Mapping[str, Any]] = {int(seq): a for seq, a in checkpoint["args"].items()}
    decisions: dict[CallPlace, ConfirmationDecision] = {}
    for confirmation in decided:
        if confirmation.seq is not None and confirmation.args is not None:
            args[confirmation.seq] = confirmation.args
        decisions[(confirmation.item_key, confirmation.call_key)] = decision_of(confirmation)
    firsts = list(accumulate((len(calls) for _, calls in chains), initial=0))
    admitted = [
        [args.get(first + offset, {}) for offset in range(len(calls))]
        for first, (_, calls) in zip(firsts, chains, strict=False)
    ]
    point = _resume_point(rows, [len(calls) for _, calls in chains], contract)
    context = checkpoint.get("context") or {}
    identity = RunIdentity(run.id, run.owner, run.caller, context, contract.hash)
    deadline_s = checkpoint.get("deadline_s")
    if checkpoint["kind"] == "sequential":
        ((_, calls),) = chains
        plan = SequentialPlan(run.owner, tuple(calls), context, deadline_s)
        return SequentialRun(ports, identity, plan, admitted[0], point, decisions=decisions)
    lanes = tuple(Lane(item_key or "", tuple(calls)) for item_key, calls in chains)
    parallel = ParallelPlan(run.owner, checkpoint["max_concurrency"], lanes, context, deadline_s)
    assert run.parallel_batch_id is not None
    return ParallelRun(
        ports, identity, parallel, admitted, run.parallel_batch_id, point, decisions=decisions
    )


def decision_of(confirmation: Confirmation) -> ConfirmationDecision:
    """A decided confirmation as the engine's gate takes it (an expiry is a rejection)."""
    return ConfirmationDecision(
        confirmation.args_digest, confirmation.status == APPROVED, _reason(confirmation)
    )


def _reason(confirmation: Confirmation) -> str:
    if confirmation.status == "expired":
        return "nobody decided within the confirmation TTL"
    return confirmation.reason or ""


def _resume_point(
    rows: Sequence[StoredReceipt], chains: Sequence[int], contract: Contract
) -> ResumePoint:
    """Per chain, its stored receipts (in order, up to its first call without one)."""
    by_seq = {row.seq: row for row in rows}
    done: list[list[Receipt]] = []
    for first, length in zip(accumulate(chains, initial=0), chains, strict=False):
        kept: list[Receipt] = []
        for seq in range(first, first + length):
            row = by_seq.get(seq)
            if row is None:
                break
            kept.append(_receipt(row, contract))
        done.append(kept)
    next_seq = max(sum(chains), max(by_seq, default=-1) + 1)
    return ResumePoint(done, next_seq)


def _receipt(row: StoredReceipt, contract: Contract) -> Receipt:
    """A stored (redacted) receipt, as the engine reports it."""
    error = row.error
    tool = contract.tools.get(row.tool)
    return Receipt(
        row.id,
        row.run_id,
        row.seq,
        row.owner,
        row.tool,
        row.call_key,
        row.item_key,
        row.parallel_batch_id,
        Status(row.status),
        row.output,
        None
        if error is None
        else CallError(
            ErrorKind(error["kind"]), error["message"], bool(error.get("outcome_unknown"))
        ),
        row.attempts,
        row.cache_hit,
        row.cache_source_receipt_id,
        row.fingerprint,
        "" if tool is None else tool.definition_hash,
        row.idempotency_key,
        row.parent_receipt_id,
        row.control,
        row.admission_wait_ms,
        row.started_at,
        row.finished_at or row.started_at,
        row.duration_ms or 0.0,
    )
