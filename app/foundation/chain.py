"""The receipt log's hash chain: what an entry's bytes are and how links follow.

Every stored receipt and audit row is an entry of one chain: its run's (chain id
the run id) or, for an audit row without a run, its UTC day's (`day:YYYY-MM-DD`
of its `at`). Positions run 1..N per chain across both tables, in the order the
rows were written. An entry's digest is SHA-256 of its canonical content
(`entry_content`); its link is SHA-256 of the previous link and that digest, the
first entry's previous link being the chain's genesis. A run's head (its last
link) is chained in turn into checkpoints (`checkpoint_link`), which an operator
may sign (`app.foundation.signing`) and keep elsewhere.

A receipt that replaces a stored one is a new entry at the end of the chain; the
replaced row's former entry stays verifiable as a superseded entry (its position,
digest and link, kept in the replacement's audit row).

Only the standard library and canonical JSON: the offline verifier uses this.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.foundation.canonical import canonical_json, sorted_json

RECEIPTS = "receipts"
AUDIT_EVENTS = "audit_events"

# The chain's own columns, never part of an entry's content.
CHAIN_COLUMNS = frozenset({"chain_seq", "chain_link"})
# Columns the database assigns (an audit row's autoincrement id): not content.
_ASSIGNED = {RECEIPTS: frozenset[str](), AUDIT_EVENTS: frozenset({"id"})}
# Datetime columns: normalized to one text form whichever way the row was read.
_TIMES = {
    RECEIPTS: frozenset({"started_at", "finished_at", "created_at"}),
    AUDIT_EVENTS: frozenset({"at"}),
}
# Boolean columns, which SQLite's driver gives back as 0 and 1.
_BOOLEANS = {RECEIPTS: frozenset({"output_truncated", "cache_hit"}), AUDIT_EVENTS: frozenset()}
# Float columns: a whole number reads back as a float whatever it was written as.
_FLOATS = {RECEIPTS: frozenset({"admission_wait_ms", "duration_ms"}), AUDIT_EVENTS: frozenset()}

_CHAIN_GENESIS_PREFIX = b"toolloop-chain-v1\x00"
CHECKPOINT_GENESIS = hashlib.sha256(b"toolloop-checkpoints-v1").hexdigest()
DAY_CHAIN_PREFIX = "day:"


def rfc3339(value: datetime) -> str:
    """UTC with microseconds and `Z`; a naive datetime is taken as UTC."""
    if value.tzinfo is not None and value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat("T", "microseconds") + "Z"


def _time_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, str):
        # As SQLite stores it ("YYYY-MM-DD HH:MM:SS.ffffff") or as exported.
        return rfc3339(datetime.fromisoformat(value.replace("Z", "+00:00")))
    return value


def entry_content(table: str, row: Mapping[str, Any]) -> bytes:
    """The bytes of a row: its table and its columns but the chain's own and the
    database-assigned ones, as compact JSON with sorted keys (`sorted_json`; JSON
    columns as their values). A row read back from either database (times as
    datetimes or SQLite text, booleans as 0/1, floats as floats) gives the bytes it
    was written with."""
    times = _TIMES[table]
    booleans = _BOOLEANS[table]
    floats = _FLOATS[table]
    skipped = _ASSIGNED[table]
    document: dict[str, Any] = {"table": table}
    for name, value in row.items():
        if name in CHAIN_COLUMNS or name in skipped:
            continue
        if value is not None:
            if name in times:
                value = _time_value(value)
            elif name in booleans:
                value = bool(value)
            elif name in floats:
                value = float(value)
        document[name] = value
    return sorted_json(document)


def entry_digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def row_digest(table: str, row: Mapping[str, Any]) -> str:
    return entry_digest(entry_content(table, row))


def genesis(chain_id: str) -> str:
    return hashlib.sha256(_CHAIN_GENESIS_PREFIX + chain_id.encode()).hexdigest()


def link(prev_hex: str, digest_hex: str) -> str:
    return hashlib.sha256(bytes.fromhex(prev_hex) + bytes.fromhex(digest_hex)).hexdigest()


def day_chain_id(at: datetime) -> str:
    """The chain of audit rows without a run: their UTC day's."""
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return DAY_CHAIN_PREFIX + at.date().isoformat()


def chain_id_of(run_id: str | None, at: datetime) -> str:
    return run_id if run_id is not None else day_chain_id(at)


@dataclass(frozen=True, slots=True)
class Entry:
    """One position of a chain: the digest of the row there and the link it stored."""

    position: int
    digest: str
    link: str


def verify_chain(
    chain_id: str, entries: Iterable[Entry], superseded: Iterable[Entry] = ()
) -> list[str]:
    """The chain's problems, each named (empty: intact). `entries` are the current
    rows' entries; `superseded` the former entries of rows a replacement took the
    place of (their position is taken by nothing else). Together they must cover
    positions 1..N once each, and every link must follow from the previous one."""
    by_position: dict[int, Entry] = {}
    problems: list[str] = []
    for entry in [*entries, *superseded]:
        if entry.position < 1:
            problems.append(f"{chain_id}: invalid position {entry.position}")
        elif entry.position in by_position:
            problems.append(f"{chain_id}: duplicate position {entry.position}")
        else:
            by_position[entry.position] = entry
    previous = genesis(chain_id)
    length = max(by_position, default=0)
    for position in range(1, length + 1):
        found = by_position.get(position)
        if found is None:
            problems.append(f"{chain_id}: missing position {position}")
            previous = ""
            continue
        if previous and link(previous, found.digest) != found.link:
            problems.append(f"{chain_id}: link mismatch at position {position}")
        previous = found.link
    return problems


def head(chain_id: str, entries: Iterable[Entry]) -> tuple[int, str]:
    """The chain's (length, last link); (0, genesis) when it is empty."""
    last = max(entries, key=lambda entry: entry.position, default=None)
    return (0, genesis(chain_id)) if last is None else (last.position, last.link)


# Checkpoints: each chains the heads of the runs that ended since the previous one.


@dataclass(frozen=True, slots=True)
class RunHead:
    run_id: str
    length: int
    head: str


def checkpoint_payload(seq: int, created_at: datetime, runs: Iterable[RunHead]) -> bytes:
    ordered = sorted(runs, key=lambda run: run.run_id)
    return canonical_json(
        {
            "seq": seq,
            "created_at": rfc3339(created_at),
            "runs": [
                {"run_id": run.run_id, "length": run.length, "head": run.head} for run in ordered
            ],
        }
    )


def checkpoint_link(prev_hex: str, payload: bytes) -> str:
    return hashlib.sha256(bytes.fromhex(prev_hex) + hashlib.sha256(payload).digest()).hexdigest()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    seq: int
    created_at: datetime
    runs: tuple[RunHead, ...]
    prev: str
    link: str


def verify_checkpoints(checkpoints: Iterable[Checkpoint]) -> list[str]:
    """Problems in a run of consecutive checkpoints (ordered by seq): each must link
    from the one before it (the first from the genesis when its seq is 1, else from
    the `prev` it states) and its link must follow from its payload."""
    problems: list[str] = []
    previous: Checkpoint | None = None
    for checkpoint in checkpoints:
        if previous is None:
            if checkpoint.seq == 1 and checkpoint.prev != CHECKPOINT_GENESIS:
                problems.append("checkpoint 1: does not start from the genesis")
        elif checkpoint.seq != previous.seq + 1:
            problems.append(f"checkpoint {checkpoint.seq}: follows {previous.seq}")
        elif checkpoint.prev != previous.link:
            problems.append(f"checkpoint {checkpoint.seq}: prev is not checkpoint {previous.seq}")
        payload = checkpoint_payload(checkpoint.seq, checkpoint.created_at, checkpoint.runs)
        if checkpoint_link(checkpoint.prev, payload) != checkpoint.link:
            problems.append(f"checkpoint {checkpoint.seq}: link mismatch")
        previous = checkpoint
    return problems
