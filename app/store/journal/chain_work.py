"""A batch's linking as the writer plans it (`app.store.journal.chain` does it):
the heads it starts from, the checkpoint due with it, the heads it ends with."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.foundation.signing import CheckpointSigner


@dataclass(frozen=True, slots=True)
class Head:
    length: int
    link: str


@dataclass(slots=True)
class CheckpointDue:
    """A checkpoint to write with the batch: the heads of the runs ended before it
    and not yet checkpointed, with those the batch ends."""

    pending: dict[str, Head]
    signer: CheckpointSigner | None


@dataclass(slots=True)
class ChainWork:
    """A batch's linking: the heads it starts from; those it ends with, once linked
    (by the last attempt); whether it is linked in its transaction."""

    known: dict[str, Head]
    lookup: frozenset[str] = frozenset()
    ended: tuple[str, ...] = ()
    checkpoint: CheckpointDue | None = None
    linked: dict[str, Head] | None = None
    in_transaction: bool = False
    checkpointed: tuple[str, ...] = field(default=())
