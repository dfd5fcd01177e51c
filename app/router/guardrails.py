"""Guardrails: App-registered policies that may deny a proposed call before it runs.

Each guardrail is called with the call as plain JSON (`policies.call_policy`);
they run in the request's order and the first denial of an enforcing one wins.
A guardrail declared `mode: shadow` denies nothing: what it would have denied,
or how it failed, is handed to the caller to record, and the call goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.contract.compiled import PolicyCallable
from app.router.policies import PolicyFailed, call_policy, short


@dataclass(frozen=True, slots=True)
class Denial:
    guardrail: str
    reason: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one guardrail said of one call: `reason` None allows; `failed` says the
    guardrail raised, timed out or answered outside its contract (the reason says how)."""

    guardrail: str
    reason: str | None
    failed: bool = False


async def judge(guardrail: PolicyCallable, call: Mapping[str, Any], timeout_s: float) -> Verdict:
    """`None` or `"allow"` allows; any other string denies with that reason."""
    try:
        verdict = await call_policy(guardrail, call, timeout_s)
    except PolicyFailed as exc:
        return Verdict(guardrail.name, f"guardrail {exc}", failed=True)
    if verdict is None or verdict == "allow":
        return Verdict(guardrail.name, None)
    if isinstance(verdict, str):
        reason = verdict.strip() or f"guardrail {guardrail.name!r} denied the call"
        return Verdict(guardrail.name, short(reason))
    return Verdict(
        guardrail.name,
        f"guardrail {guardrail.name!r} returned {type(verdict).__name__}, "
        "not None, 'allow' or a reason",
        failed=True,
    )


async def first_denial(
    guardrails: Sequence[PolicyCallable],
    call: Mapping[str, Any],
    timeout_s: float,
    shadowed: Callable[[Verdict], None],
) -> Denial | None:
    """Run the guardrails in order; the first enforcing one that does not allow the
    call wins, and a guardrail that fails denies (fail closed).

    A shadow guardrail denies nothing: what it would have denied, or how it failed,
    goes to `shadowed`, and the next guardrail runs (it fails open).
    """
    for guardrail in guardrails:
        verdict = await judge(guardrail, call, timeout_s)
        if verdict.reason is None:
            continue
        if guardrail.shadow:
            shadowed(verdict)
            continue
        return Denial(guardrail.name, verdict.reason)
    return None
