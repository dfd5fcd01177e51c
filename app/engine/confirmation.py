"""The confirmation gate: a call of a `requires_confirmation` tool runs only once a
decider approved that exact call (its arguments' digest, under the run's contract).

Every path that runs a tool goes through `CallPipeline.execute`, which asks
`gate` first. Without a decision for the call, it raises `ConfirmationRequired`
holding the `WaitingCall`: nothing runs and no receipt is written. A plan's chain
(`run_chain`) then stops there and waits; a dispatch from a running tool is refused
(the parent cannot wait); a router run asks for confirmations before it calls the
engine and hands the approval back on resume. A rejection settles the call as a
`denied` receipt (error kind `confirmation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from app.engine.errors import EngineError
from app.foundation.canonical import canonical_json, sha256_digest

# A call within its run: (item_key, call_key); call keys are unique per chain.
CallPlace = tuple[str | None, str]


def args_digest(args: Mapping[str, Any]) -> str:
    """What a decision is bound to, with the run's contract hash (the router's digest too)."""
    return sha256_digest(canonical_json(args))


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """A call stopped at the gate; `args` are exactly the admitted arguments."""

    confirmation_id: str
    seq: int
    call_key: str
    item_key: str | None
    tool: str
    args: Mapping[str, Any]
    args_digest: str

    def public(self) -> dict[str, Any]:
        """As a plan response lists it: everything but the arguments."""
        return {
            "confirmation_id": self.confirmation_id,
            "call_key": self.call_key,
            "item_key": self.item_key,
            "tool": self.tool,
            "args_digest": self.args_digest,
        }


@dataclass(frozen=True, slots=True)
class ConfirmationDecision:
    """A decider's answer for one call, bound to the arguments' digest it was asked for."""

    args_digest: str
    approve: bool
    reason: str = ""


class ConfirmationRequired(EngineError):
    """Raised by the gate: the call waits for a decision and did not run."""

    def __init__(self, waiting: WaitingCall) -> None:
        self.waiting = waiting
        super().__init__(
            f"call {waiting.call_key!r} of tool {waiting.tool!r} requires a confirmation"
        )


def gate(
    decisions: Mapping[CallPlace, ConfirmationDecision],
    *,
    seq: int,
    call_key: str,
    item_key: str | None,
    tool: str,
    args: Mapping[str, Any],
) -> ConfirmationDecision:
    """The decision recorded for this exact call; raises ConfirmationRequired when there
    is none, or when it was given for other arguments."""
    digest = args_digest(args)
    decision = decisions.get((item_key, call_key))
    if decision is None or decision.args_digest != digest:
        waiting = WaitingCall(uuid4().hex, seq, call_key, item_key, tool, args, digest)
        raise ConfirmationRequired(waiting)
    return decision
