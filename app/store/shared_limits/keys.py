"""Advisory-lock keys for tools' concurrency slots.

Every lock the service takes uses PostgreSQL's two-int form: the first int is
`NAMESPACE`, fixed, so that other applications' advisory locks on the same
database do not collide with ours; the second is a tool's slot, hashed. Two
slots hashing alike only make a slot scarcer (a wait), never a limit wider.
"""

from __future__ import annotations

from hashlib import blake2b

NAMESPACE = 0x746C6C70  # "tllp"

# Tools' releases are announced here; the payload is the tool id.
CHANNEL = "toolloop_admission"

# A process that finds none of a tool's slots free asks here, naming the tool, for
# the slots other processes hold idle.
WANTED_CHANNEL = "toolloop_admission_wanted"


def slot_key(tool_id: str, index: int) -> int:
    """Slot `index` of the tool, as a signed 32-bit int."""
    digest = blake2b(f"{tool_id}\x00{index}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def slot_keys(tool_id: str, limit: int) -> tuple[int, ...]:
    return tuple(slot_key(tool_id, index) for index in range(limit))
