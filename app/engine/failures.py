"""How a call that did not succeed is described: statuses and error messages."""

from __future__ import annotations

from typing import Any

from app.contract.compiled import Effect, Tool
from app.contract.schemas import CompiledSchema
from app.engine.call import Call
from app.engine.receipt import CallError, ErrorKind, Status
from app.foundation.canonical import fingerprint

Outcome = tuple[Status, Any, CallError | None]

_MAX_PROBLEMS = 20
BAD_ARGS = "arguments do not match the input schema"
BAD_OUTPUT = "output does not match the output schema"
NOT_JSON_OUTPUT = "output is not a JSON value"
DEADLINE_SKIP = CallError(ErrorKind.DEADLINE, "not started: the run's deadline had passed")
CANCELLED_SKIP = CallError(ErrorKind.CANCELLED, "not started: the run was cancelled")
START_NOT_RECORDED = CallError(
    ErrorKind.INTERRUPTED, "not started: the run's start could not be recorded"
)
# Calls after the one that stopped a chain (a sequential plan or a lane).
NOT_RUN_CANCELLED = CallError(ErrorKind.CANCELLED, "not run: the run was cancelled")
NOT_RUN_DEADLINE = CallError(ErrorKind.DEADLINE, "not run: the run's deadline had passed")
_CANCELLED_BETWEEN = CallError(
    ErrorKind.CANCELLED, "the run was cancelled between attempts of this call"
)


def lost_runner(tool: Tool) -> CallError:
    """A call whose runner stopped mid-call and that is not run again."""
    unknown = tool.effect is not Effect.READ
    message = "the worker running this call stopped"
    if unknown:
        message += "; outcome unknown: the call may have taken effect"
    return CallError(ErrorKind.INTERRUPTED, message, outcome_unknown=unknown)


def not_run_after(call_key: str) -> CallError:
    return CallError(ErrorKind.CANCELLED, f"not run: call {call_key!r} before it did not succeed")


def failure_status(error: CallError) -> Status:
    if error.kind is ErrorKind.TIMEOUT or error.kind is ErrorKind.DEADLINE:
        return Status.TIMED_OUT
    return Status.FAILED


def deadline_stop(call: Call) -> Outcome:
    last = call.last_error
    if call.attempts == 0 or last is None:
        return Status.SKIPPED, None, DEADLINE_SKIP
    return failure_status(last), None, last


def timed_out(tool: Tool, timeout_s: float, by_deadline: bool) -> CallError:
    limit = "the run's deadline" if by_deadline else f"the tool timeout of {tool.timeout_s:g}s"
    message = f"no result within {timeout_s:.3g}s ({limit})"
    if not tool.target.is_async:
        message += (
            "; a sync callable cannot be stopped: it may still finish in its worker thread, "
            "and that late result is discarded"
        )
    unknown = tool.effect is not Effect.READ
    if unknown:
        message += "; outcome unknown: the call may have taken effect"
        if tool.effect is Effect.NON_IDEMPOTENT and not by_deadline:
            message += ", so it is not retried automatically (effect non_idempotent)"
    kind = ErrorKind.DEADLINE if by_deadline else ErrorKind.TIMEOUT
    return CallError(kind, message, outcome_unknown=unknown)


def not_started_in_time(tool: Tool, timeout_s: float, by_deadline: bool) -> CallError:
    """A sync call whose worker thread never became free within its timeout: it never
    ran, so its outcome is known (nothing happened) and it may be retried."""
    limit = "the run's deadline" if by_deadline else f"the tool timeout of {tool.timeout_s:g}s"
    message = (
        f"not started: no worker thread was free within {timeout_s:.3g}s ({limit}); "
        "the call never ran"
    )
    return CallError(ErrorKind.DEADLINE if by_deadline else ErrorKind.TIMEOUT, message)


def cancelled(call: Call) -> Outcome:
    if call.attempts == 0:
        return Status.SKIPPED, None, CANCELLED_SKIP
    if not call.interrupted:
        return Status.FAILED, None, _CANCELLED_BETWEEN
    tool = call.tool
    message = "the run was cancelled while the callable was running"
    if not tool.target.is_async:
        message += "; a sync callable cannot be stopped: it may still finish (result discarded)"
    unknown = tool.effect is not Effect.READ
    if unknown:
        message += "; outcome unknown: the call may have taken effect"
    return Status.FAILED, None, CallError(ErrorKind.CANCELLED, message, outcome_unknown=unknown)


def describe_problems(headline: str, schema: CompiledSchema, instance: Any) -> str:
    found = schema.problems(instance)
    if not found:
        return headline
    shown = "; ".join(f"{p.pointer or '/'}: {p.message}" for p in found[:_MAX_PROBLEMS])
    more = len(found) - _MAX_PROBLEMS
    suffix = f"; and {more} more" if more > 0 else ""
    return f"{headline}: {shown}{suffix}"


def fingerprint_or_blank(tool_id: str, args: Any) -> str:
    try:
        return fingerprint(tool_id, args)
    except (TypeError, ValueError):
        return ""
