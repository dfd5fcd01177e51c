"""What a paused run keeps to be resumed, possibly by another process.

The checkpoint is redacted like every stored copy: the request (without the
steps, which already ran), the conversation and the state. The exact
arguments of the calls waiting for confirmation are not in it: they travel
as `PendingCall`s, which the service keeps apart (see docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.foundation.canonical import canonical_json, sha256_digest


def args_digest(args: Mapping[str, Any]) -> str:
    return sha256_digest(canonical_json(args))


@dataclass(frozen=True, slots=True)
class PendingCall:
    confirmation_id: str
    call_id: str
    call_key: str
    tool: str
    args: Mapping[str, Any]
    args_digest: str
    fingerprint: str
    contract_hash: str

    def public(self) -> dict[str, Any]:
        """As listed in the outcome: everything but the arguments themselves."""
        return {
            "confirmation_id": self.confirmation_id,
            "call_id": self.call_id,
            "call_key": self.call_key,
            "tool": self.tool,
            "args_digest": self.args_digest,
            "fingerprint": self.fingerprint,
            "contract_hash": self.contract_hash,
        }


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's answer to one pending call; `args` are the stored exact arguments."""

    confirmation_id: str
    approve: bool
    reason: str
    args: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    request: Mapping[str, Any]
    transcript: Sequence[Mapping[str, Any]]
    state: Mapping[str, Any]
    next_seq: int
    pending: Sequence[Mapping[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "request": dict(self.request),
            "transcript": [dict(m) for m in self.transcript],
            "state": dict(self.state),
            "next_seq": self.next_seq,
            "pending": [dict(p) for p in self.pending],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        if data.get("version") != 1:
            raise ValueError(f"unsupported checkpoint version {data.get('version')!r}")
        return cls(
            request=data["request"],
            transcript=data["transcript"],
            state=data["state"],
            next_seq=int(data["next_seq"]),
            pending=data["pending"],
        )
