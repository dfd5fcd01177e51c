"""Identifiers that lead with their creation time.

Receipts and runs are primary keys of tables that grow without end. A random
key lands on a random page of its b-tree, so once the index outgrows the
database's cache nearly every insert reads and rewrites a page of its own (and
writes it to the WAL at commit); a key that starts with the time lands next to
the previous one. Measured on SQLite, random receipt ids made an insert cost
three to ten times more once the table held some 30,000 receipts
(`docs/decisions.md`, "Time-ordered ids").

The rest of each id stays random (80 bits), drawn from the OS 64 ids at a
time: ids are no easier to guess than before, only their creation time shows,
which the receipt and the run record anyway. A forked child drops what its
parent had drawn, so two workers never hand out the same ids.
"""

from __future__ import annotations

import os
from operator import itemgetter
from time import time_ns
from uuid import UUID

_BATCH = 64
_TAIL = 20  # hex digits: 80 random bits
_spare: list[str] = []
_take_spare = _spare.pop
# The batch's hex digits cut into tails, in one C call.
_cut = itemgetter(*(slice(start, start + _TAIL) for start in range(_TAIL, _TAIL * _BATCH, _TAIL)))
# The millisecond the last id was made in, and its 12 hex digits.
_last_ms = -1
_last_prefix = ""


def _refill() -> str:
    """A fresh tail; the rest of its batch is kept for the next ids."""
    text = os.urandom(_TAIL // 2 * _BATCH).hex()
    _spare.extend(_cut(text))
    return text[:_TAIL]


def new_receipt_id() -> str:
    """32 hex digits: milliseconds since the epoch (12), then 80 random bits (20)."""
    global _last_ms, _last_prefix
    try:
        tail = _take_spare()
    except IndexError:
        tail = _refill()
    now = time_ns() // 1_000_000
    if now != _last_ms:
        _last_ms, _last_prefix = now, f"{now:012x}"
    return _last_prefix + tail


_VERSION_7 = 0x7 << 76
_VARIANT = 0x2 << 62
_RANDOM_B = (1 << 62) - 1  # 62 random bits after the variant


def new_run_id() -> str:
    """A UUID version 7 (RFC 9562) in its usual text form: milliseconds since
    the epoch in the first 48 bits, then the version, then 74 random bits."""
    random = int.from_bytes(os.urandom(10))
    value = (
        (time_ns() // 1_000_000) << 80
        | _VERSION_7
        | (random >> 62 & 0xFFF) << 64
        | _VARIANT
        | random & _RANDOM_B
    )
    return str(UUID(int=value))


os.register_at_fork(after_in_child=_spare.clear)
