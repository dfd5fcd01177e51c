"""Identifiers: receipts and runs lead with their creation time; request ids are random.

Receipts and runs are primary keys of tables that grow without end. A random
key lands on a random page of its b-tree, so once the index outgrows the
database's cache nearly every insert reads and rewrites a page of its own (and
writes it to the WAL at commit); a key that starts with the time lands next to
the previous one. Measured on SQLite, random receipt ids made an insert cost
three to ten times more once the table held some 30,000 receipts
(`docs/decisions.md`, "Ids: time first, random from the OS").

The rest of each id stays random (80 bits), drawn from the OS 64 ids at a
time: ids are no easier to guess than before, only their creation time shows,
which the receipt and the run record anyway. A forked child drops what its
parent had drawn, so two workers never hand out the same ids.

Drawn 64 at a time because `os.urandom` is a system call that lets go of the
GIL: in the server, another thread waiting for the GIL (aiosqlite's) then
takes it, and the loop's thread waits to get it back.
"""

from __future__ import annotations

import os
from operator import itemgetter
from time import time_ns

_BATCH = 64


class _Drawn:
    """Random hex strings of `digits` digits, `_BATCH` drawn from the OS at once.

    `take` pops one off a list (one C call, safe across threads)."""

    __slots__ = ("_cut", "_digits", "_spare", "take_spare")

    def __init__(self, digits: int) -> None:
        self._digits = digits
        self._spare: list[str] = []
        self.take_spare = self._spare.pop
        # The batch's hex digits cut into pieces, in one C call.
        self._cut = itemgetter(
            *(slice(start, start + digits) for start in range(digits, digits * _BATCH, digits))
        )

    def take(self) -> str:
        try:
            return self.take_spare()
        except IndexError:
            return self._refill()

    def _refill(self) -> str:
        """A fresh piece; the rest of its batch is kept for the next ones."""
        text = os.urandom(self._digits // 2 * _BATCH).hex()
        self._spare.extend(self._cut(text))
        return text[: self._digits]

    def drop(self) -> None:
        self._spare.clear()


_TAIL = 20  # hex digits: 80 random bits
_receipt_tails = _Drawn(_TAIL)
_run_tails = _Drawn(_TAIL)
_request_ids = _Drawn(32)
_take_receipt_tail = _receipt_tails.take_spare
# The millisecond the last id was made in, and its 12 hex digits.
_last_ms = -1
_last_prefix = ""


def new_receipt_id() -> str:
    """32 hex digits: milliseconds since the epoch (12), then 80 random bits (20)."""
    global _last_ms, _last_prefix
    try:
        tail = _take_receipt_tail()
    except IndexError:
        tail = _receipt_tails.take()
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
    random = int(_run_tails.take(), 16)
    value = (
        (time_ns() // 1_000_000) << 80
        | _VERSION_7
        | (random >> 62 & 0xFFF) << 64
        | _VARIANT
        | random & _RANDOM_B
    )
    # `str(UUID(int=value))`, without building the UUID (its checks and slicing).
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def new_request_id() -> str:
    """32 random hex digits (what `uuid4().hex` gave, without building a UUID)."""
    return _request_ids.take()


def _drop_drawn() -> None:
    for drawn in (_receipt_tails, _run_tails, _request_ids):
        drawn.drop()


os.register_at_fork(after_in_child=_drop_drawn)
