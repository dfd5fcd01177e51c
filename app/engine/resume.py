"""Where a resumed plan run picks up: what already succeeded, and the next free `seq`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.engine.receipt import Receipt


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """`done[i]` holds the receipts of the leading succeeded calls of chain `i` (the
    sequential plan, or lane `i`); they are reported again, never run again. The
    chain continues with the call after them, under the same `seq`, hence the same
    idempotency key. Calls dispatched by tools get sequence numbers from `next_seq`,
    past every receipt the run already stored."""

    done: Sequence[Sequence[Receipt]]
    next_seq: int
