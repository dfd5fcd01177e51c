"""Guardrails: App-registered policies that may deny a proposed call before it runs.

Each guardrail is called with the call as plain JSON (`policies.call_policy`);
they run in the request's order and the first denial wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.contract.compiled import PolicyCallable
from app.router.policies import PolicyFailed, call_policy, short


@dataclass(frozen=True, slots=True)
class Denial:
    guardrail: str
    reason: str


async def first_denial(
    guardrails: Sequence[PolicyCallable], call: Mapping[str, Any], timeout_s: float
) -> Denial | None:
    """Run the guardrails in order; the first that does not allow the call wins.

    `None` or `"allow"` allows; any other string denies with that reason. A
    guardrail that fails or answers anything else denies (fail closed).
    """
    for guardrail in guardrails:
        try:
            verdict = await call_policy(guardrail, call, timeout_s)
        except PolicyFailed as exc:
            return Denial(guardrail.name, f"guardrail {exc}")
        if verdict is None or verdict == "allow":
            continue
        if isinstance(verdict, str):
            reason = verdict.strip() or f"guardrail {guardrail.name!r} denied the call"
            return Denial(guardrail.name, short(reason))
        return Denial(
            guardrail.name,
            f"guardrail {guardrail.name!r} returned {type(verdict).__name__}, "
            "not None, 'allow' or a reason",
        )
    return None
