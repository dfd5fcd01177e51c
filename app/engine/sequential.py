"""Calls in order: a sequential plan, and the calls of one parallel lane.

A call that does not succeed stops the chain; every call after it still gets
a receipt, `skipped`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Literal

from app.engine.confirmation import ConfirmationRequired, WaitingCall
from app.engine.failures import NOT_RUN_CANCELLED, NOT_RUN_DEADLINE, not_run_after
from app.engine.pipeline import CallPipeline
from app.engine.plan import PlannedCall
from app.engine.receipt import CallError, Receipt, Status
from app.engine.run import RunState

PlanStatus = Literal["succeeded", "failed", "pending"]

# Read once: an enum member read through its class costs a lookup in the metaclass.
_SUCCEEDED = Status.SUCCEEDED
_ONLY_SUCCEEDED = frozenset({_SUCCEEDED})
_status_of = attrgetter("status")


def chain_status(receipts: Sequence[Receipt]) -> PlanStatus:
    # The statuses collected in C, not a generator step per receipt.
    return "succeeded" if _ONLY_SUCCEEDED.issuperset(map(_status_of, receipts)) else "failed"


@dataclass(frozen=True, slots=True)
class SequentialOutcome:
    run_id: str
    contract_hash: str
    receipts: tuple[Receipt, ...]
    # Receipts of calls that running tools dispatched, in completion order.
    dispatched: tuple[Receipt, ...]
    # The call the plan waits on for a confirmation (its receipts stop before it).
    waiting: tuple[WaitingCall, ...] = ()

    @property
    def status(self) -> PlanStatus:
        return "pending" if self.waiting else chain_status(self.receipts)

    def to_response(self) -> dict[str, Any]:
        response = {
            "plan_id": self.run_id,
            "kind": "sequential",
            "status": self.status,
            "contract_hash": self.contract_hash,
            "receipts": [receipt.to_response() for receipt in self.receipts],
            "dispatched": [receipt.to_response() for receipt in self.dispatched],
        }
        if self.waiting:
            response["pending"] = [call.public() for call in self.waiting]
        return response


async def run_chain(
    pipeline: CallPipeline,
    state: RunState,
    calls: Sequence[PlannedCall],
    args: Sequence[Mapping[str, Any]],
    first_seq: int,
    item_key: str | None,
    out: list[Receipt],
    done: Sequence[Receipt] = (),
) -> None:
    """Run `calls` in order, appending one receipt per call to `out` (empty at first).

    `done` are the receipts of the leading calls a resumed run already completed:
    they go to `out` as they are and the chain starts after them. A call that waits
    for a confirmation stops the chain without a receipt: it goes to `state.waiting`
    and the calls after it wait with it.
    """
    tools = pipeline.contract.tools
    out.extend(done)
    for index in range(len(done), len(calls)):
        call = calls[index]
        try:
            receipt = await pipeline.execute(
                state,
                tools[call.tool],
                args[index],
                first_seq + index,
                call.call_key,
                item_key,
                out,
            )
        except ConfirmationRequired as exc:
            state.waiting.append(exc.waiting)
            return
        except BaseException:
            _skip_rest(pipeline, state, calls, args, first_seq, item_key, out, NOT_RUN_CANCELLED)
            raise
        if receipt.status is not _SUCCEEDED:
            deadline = state.deadline
            if deadline is not None and state.loop.time() >= deadline:
                reason = NOT_RUN_DEADLINE
            else:
                reason = not_run_after(call.call_key)
            _skip_rest(pipeline, state, calls, args, first_seq, item_key, out, reason)
            return


def _skip_rest(
    pipeline: CallPipeline,
    state: RunState,
    calls: Sequence[PlannedCall],
    args: Sequence[Mapping[str, Any]],
    first_seq: int,
    item_key: str | None,
    out: list[Receipt],
    reason: CallError,
) -> None:
    tools = pipeline.contract.tools
    for index in range(len(out), len(calls)):
        call = calls[index]
        pipeline.skip(
            state,
            tools[call.tool],
            args[index],
            first_seq + index,
            call.call_key,
            item_key,
            reason,
            out,
        )
