"""A plan's `context` as it is stored with its run and audited: redacted.

The context belongs to no tool, so no single tool's `redact` applies. It is
redacted with the built-in secret patterns and with every key name a tool of
the plan's owner declares in `redact`: what the owner calls secret in a call is
secret in what its plans carry too (docs/decisions.md, "A plan's context is
stored with its run").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.contract import Contract
from app.foundation.redaction import Redactor


class ContextRedaction:
    """One redactor per owner of the contract, built once."""

    __slots__ = ("_by_owner",)

    def __init__(self, contract: Contract) -> None:
        names: dict[str, set[str]] = {owner: set() for owner in contract.owners}
        for tool in contract.tools.values():
            names.setdefault(tool.owner, set()).update(tool.redact)
        self._by_owner = {
            owner: Redactor(sorted(keys)) if keys else Redactor.default()
            for owner, keys in names.items()
        }

    def stored(self, owner: str, context: Mapping[str, Any]) -> dict[str, Any]:
        """The copy of `context` that may be stored (a new mapping; the input is unchanged)."""
        redactor = self._by_owner.get(owner, Redactor.default())
        redacted: dict[str, Any] = redactor.redact(dict(context))
        return redacted
