"""Handing admitted calls to the engine, and recording what came back.

The router never runs a tool: admitted calls go to `Engine.run_call` (one turn's
calls as a bounded concurrent batch, results matched by call id), refused ones
to `Engine.record_denied`. Both give durable receipts and audit events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any, NamedTuple

from app.contract.compiled import Tool
from app.engine.confirmation import ConfirmationDecision
from app.engine.errors import CallRejected
from app.engine.receipt import ErrorKind, Receipt
from app.foundation.redaction import DEFAULT_REDACTOR
from app.router import transcript
from app.router.observations import observation
from app.router.policies import short
from app.router.session import RunSession

MAX_SHOWN_ARGS = 2000


class Admitted(NamedTuple):
    """A call the router admitted, for the engine. (Immutable; one is built per call.)"""

    call_id: str
    call_key: str
    tool: Tool
    args: Mapping[str, Any]
    # The arguments' fingerprint when the router validated them with this tool's
    # compiled input schema (the engine then does neither again); None: not checked.
    checked_fingerprint: str | None = None
    # The approval of this exact call, for a tool that requires a confirmation.
    confirmed: ConfirmationDecision | None = None


async def execute(session: RunSession, admitted: Sequence[Admitted]) -> dict[str, str]:
    """Run the admitted calls concurrently (bounded); the observation of each, by call id."""
    if not admitted:
        return {}
    if len(admitted) == 1:
        return await _execute_one(session, admitted[0])
    engine, state = session.kit.engine, session.engine_state
    gate = asyncio.Semaphore(session.kit.limits.max_parallel_calls)
    started: set[str] = set()

    async def one(item: Admitted) -> Receipt:
        async with gate:
            started.add(item.call_id)
            return await engine.run_call(
                state,
                item.tool.id,
                item.args,
                call_key=item.call_key,
                checked_fingerprint=item.checked_fingerprint,
                confirmed=item.confirmed,
            )

    tasks = [asyncio.create_task(one(item)) for item in admitted]
    try:
        await asyncio.wait(tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # Calls still waiting for a slot never reached the engine: they get `skipped`
        # receipts too, so every admitted call of a cancelled run has one.
        for item in admitted:
            if item.call_id not in started:
                receipt = engine.record_not_started(
                    state, item.tool.id, item.args, call_key=item.call_key
                )
                session.keep(receipt, receipt.to_stored(), None)
        with suppress(Exception):
            await state.flush()
        raise
    results: dict[str, str] = {}
    for item, task in zip(admitted, tasks, strict=True):
        error = task.exception()
        if isinstance(error, CallRejected):
            results[item.call_id] = "rejected: engine: " + "; ".join(error.reasons)
        elif error is not None:
            raise error
        else:
            results[item.call_id] = _settle(session, task.result())
    _collect_dispatched(session)
    return results


async def _execute_one(session: RunSession, item: Admitted) -> dict[str, str]:
    """`execute` for one call: awaited in place, with no task, gate or wait around it."""
    state = session.engine_state
    try:
        receipt = await session.kit.engine.run_call(
            state,
            item.tool.id,
            item.args,
            call_key=item.call_key,
            checked_fingerprint=item.checked_fingerprint,
            confirmed=item.confirmed,
        )
    except CallRejected as error:
        result = "rejected: engine: " + "; ".join(error.reasons)
    except Exception:
        raise
    except BaseException:
        # Cancelled: the engine gave the call its receipt; make what was written durable.
        with suppress(Exception):
            await state.flush()
        raise
    else:
        result = _settle(session, receipt)
    if len(state.dispatched) != session.dispatched_seen:
        _collect_dispatched(session)
    return {item.call_id: result}


async def deny(
    session: RunSession,
    tool: Tool,
    args: Mapping[str, Any],
    call_key: str,
    reason: str,
    *,
    call_id: str | None,
    guardrail: str | None = None,
    kind: ErrorKind = ErrorKind.GUARDRAIL,
) -> str:
    """Record a refused call (`denied` receipt); what the model sees is `denied: <reason>`."""
    receipt = await session.kit.engine.record_denied(
        session.engine_state, tool.id, args, call_key=call_key, reason=reason, kind=kind
    )
    text = f"denied: {reason}"
    seen = {"call_key": call_key, "tool": tool.id, "status": "denied", "summary": text}
    session.keep(receipt, receipt.to_stored(), seen | {"truncated": False})
    session.record(
        "router.call_denied",
        {
            "call_id": call_id,
            "guardrail": guardrail,
            "reason": reason,
            "receipt_id": receipt.receipt_id,
            "fingerprint": receipt.fingerprint,
            "args": shown_args(session, tool.id, args),
        },
        tool=tool.id,
        call_key=call_key,
    )
    return text


def shown_args(session: RunSession, tool_id: str, args: Mapping[str, Any]) -> str:
    """A call's arguments as the decision audit keeps them: redacted and shortened."""
    redactor = session.kit.redactors.get(tool_id, DEFAULT_REDACTOR)
    return short(transcript.redact_parsed(args, redactor), MAX_SHOWN_ARGS)


def _settle(session: RunSession, receipt: Receipt) -> str:
    stored = receipt.to_stored()
    seen = observation(stored, session.kit.limits.max_observation_chars)
    session.keep(receipt, stored, seen)
    return str(seen["summary"])


def _collect_dispatched(session: RunSession) -> None:
    """Receipts of calls the tools dispatched themselves: kept, not observed."""
    dispatched = session.engine_state.dispatched
    if len(dispatched) == session.dispatched_seen:
        return  # nothing new: no pass over the run's receipts
    session.dispatched_seen = len(dispatched)
    known = {r.receipt_id for r in session.receipts}
    for receipt in dispatched:
        if receipt.receipt_id not in known:
            session.keep(receipt, receipt.to_stored(), None)
