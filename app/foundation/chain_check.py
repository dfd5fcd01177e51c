"""What is checked of stored chain rows and checkpoints, in the service and offline alike.

Rows come in their stored form (`app.foundation.audit_bundle`): columns by name,
times as RFC 3339 UTC text, JSON columns as values, with `chain_seq` and
`chain_link`. Each row's digest is recomputed from its content
(`app.foundation.chain`), so a changed column, a removed, inserted or reordered
row breaks its chain (`verify_chain`). A chain says nothing of rows removed
from its end: a checkpoint does, holding each run's length and head when it
was written; checkpoints chain to each other, and a signed one vouches for all
those before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeGuard

from app.foundation import chain as links
from app.foundation import signing

RECEIPTS = links.RECEIPTS
AUDIT_EVENTS = links.AUDIT_EVENTS
# Where a replacement's audit row records the entry of the receipt it replaced:
# `{"seq", "digest", "link"}` under this key of its detail.
SUPERSEDED_KEY = "chain"
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One chained row: its place, where it is stored, its recomputed digest, its link."""

    position: int
    table: str
    row_id: str
    digest: str
    link: str


@dataclass(slots=True)
class Chain:
    chain_id: str
    entries: list[StoredEntry] = field(default_factory=list)
    # The former entries of receipts replaced since, as their replacement recorded them.
    superseded: list[links.Entry] = field(default_factory=list)
    unchained: int = 0
    # Rows whose chain columns or content cannot be read (left out of `entries`).
    unreadable: list[str] = field(default_factory=list)

    @property
    def length(self) -> int:
        return max(self.positions(), default=0)

    @property
    def head(self) -> str:
        return self.link_at(self.length) or links.genesis(self.chain_id)

    def positions(self) -> list[int]:
        return [e.position for e in self.entries] + [e.position for e in self.superseded]

    def link_at(self, position: int) -> str | None:
        for entry in self.entries:
            if entry.position == position:
                return entry.link
        for former in self.superseded:
            if former.position == position:
                return former.link
        return None

    def problems(self) -> list[str]:
        current = [links.Entry(e.position, e.digest, e.link) for e in self.entries]
        return [*self.unreadable, *links.verify_chain(self.chain_id, current, self.superseded)]


@dataclass(frozen=True, slots=True)
class Findings:
    """What a check found: `problems` break the evidence; `notes` say what it cannot vouch for."""

    problems: list[str]
    notes: list[str]

    @property
    def intact(self) -> bool:
        return not self.problems


def chain_of_row(row: Mapping[str, Any]) -> str:
    """The chain of a row in its stored form (`at` as RFC 3339 text)."""
    run_id = row.get("run_id")
    if run_id is not None:
        return str(run_id)
    return links.DAY_CHAIN_PREFIX + str(row.get("at"))[:10]


def chains_of(
    receipts: Iterable[Mapping[str, Any]], audit: Iterable[Mapping[str, Any]]
) -> dict[str, Chain]:
    chains: dict[str, Chain] = {}
    for table, rows in ((RECEIPTS, receipts), (AUDIT_EVENTS, audit)):
        for row in rows:
            chain_id = chain_of_row(row)
            chain = chains.get(chain_id) or chains.setdefault(chain_id, Chain(chain_id))
            _add(chain, table, row)
    for chain in chains.values():
        chain.entries.sort(key=lambda entry: entry.position)
    return chains


def _add(chain: Chain, table: str, row: Mapping[str, Any]) -> None:
    named = f"{chain.chain_id}: {table} row {row.get('id')}"
    if table == AUDIT_EVENTS:
        former = _superseded(row)
        if isinstance(former, str):
            chain.unreadable.append(f"{named}: {former}")
        elif former is not None:
            chain.superseded.append(former)
    position, link = row.get("chain_seq"), row.get("chain_link")
    if position is None and link is None:
        chain.unchained += 1
        return
    if not _is_position(position) or not _is_sha256(link):
        chain.unreadable.append(f"{named}: its chain columns are not a position and a link")
        return
    try:
        digest = links.row_digest(table, row)
    except (KeyError, TypeError, ValueError):
        chain.unreadable.append(f"{named}: its content cannot be read")
        return
    chain.entries.append(StoredEntry(position, table, str(row.get("id")), digest, str(link)))


def _superseded(row: Mapping[str, Any]) -> links.Entry | str | None:
    """The former entry a replacement's audit row records (None if it is not one; a
    str saying why if it cannot be read)."""
    detail = row.get("detail")
    recorded = detail.get(SUPERSEDED_KEY) if isinstance(detail, dict) else None
    if recorded is None:
        return None
    if (
        not isinstance(recorded, dict)
        or not _is_position(recorded.get("seq"))
        or not _is_sha256(recorded.get("digest"))
        or not _is_sha256(recorded.get("link"))
    ):
        return "the entry it records of a replaced receipt cannot be read"
    return links.Entry(recorded["seq"], recorded["digest"], recorded["link"])


def _is_position(value: Any) -> TypeGuard[int]:
    return type(value) is int


def _is_sha256(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class SignedCheckpoint:
    checkpoint: links.Checkpoint
    signature: str | None


def check(
    chains: Mapping[str, Chain],
    checkpoints: Sequence[Mapping[str, Any]],
    *,
    public_key_pem: bytes | None = None,
) -> Findings:
    """The chains' and checkpoints' problems, and what they cannot vouch for."""
    problems: list[str] = []
    notes: list[str] = []
    for chain in chains.values():
        problems.extend(chain.problems())
        if chain.unchained:
            notes.append(f"{chain.chain_id}: {chain.unchained} row(s) written before chaining")
    ordered, unreadable = _checkpoints(checkpoints)
    problems.extend(unreadable)
    problems.extend(links.verify_checkpoints([signed.checkpoint for signed in ordered]))
    covered = _coverage_problems(chains, ordered, problems)
    for chain_id in sorted(set(chains) - covered):
        if not chain_id.startswith(links.DAY_CHAIN_PREFIX):
            notes.append(
                f"{chain_id}: no checkpoint covers it yet; rows removed from its end would not show"
            )
    if public_key_pem is not None:
        signature_problems, signature_notes = _signature_findings(ordered, public_key_pem)
        problems.extend(signature_problems)
        notes.extend(signature_notes)
    else:
        notes.append("signatures not checked: no public key given")
    return Findings(problems, notes)


def _checkpoints(rows: Sequence[Mapping[str, Any]]) -> tuple[list[SignedCheckpoint], list[str]]:
    """The checkpoints in seq order, and a problem for each that cannot be read."""
    read: list[SignedCheckpoint] = []
    problems: list[str] = []
    for row in rows:
        try:
            read.append(_checkpoint(row))
        except (KeyError, TypeError, ValueError):
            problems.append(f"checkpoint {row.get('seq')}: its content cannot be read")
    return sorted(read, key=lambda signed: signed.checkpoint.seq), problems


def _checkpoint(row: Mapping[str, Any]) -> SignedCheckpoint:
    prev, link, signature = row["prev"], row["link"], row.get("signature")
    if not (_is_position(row["seq"]) and _is_sha256(prev) and _is_sha256(link)):
        raise ValueError("not a checkpoint")
    if signature is not None and not isinstance(signature, str):
        raise ValueError("not a signature")
    runs = tuple(
        links.RunHead(str(held["run_id"]), int(held["length"]), str(held["head"]))
        for held in row["runs"]
    )
    created_at = datetime.fromisoformat(str(row["created_at"]).replace("Z", "+00:00"))
    return SignedCheckpoint(links.Checkpoint(row["seq"], created_at, runs, prev, link), signature)


def _coverage_problems(
    chains: Mapping[str, Chain], ordered: Sequence[SignedCheckpoint], problems: list[str]
) -> set[str]:
    """Check each run's chain against what the checkpoints hold of it; the runs covered."""
    covered: set[str] = set()
    for signed in ordered:
        for held in signed.checkpoint.runs:
            chain = chains.get(held.run_id)
            if chain is None:
                continue
            covered.add(chain.chain_id)
            seq = signed.checkpoint.seq
            where = f"{chain.chain_id}: checkpoint {seq} holds {held.length} entries"
            if held.length > chain.length:
                problems.append(f"{where}, the rows only {chain.length}: rows removed from its end")
            elif (chain.link_at(held.length) or links.genesis(chain.chain_id)) != held.head:
                problems.append(f"{where} ending in another head than the rows'")
    return covered


def _signature_findings(
    ordered: Sequence[SignedCheckpoint], public_key_pem: bytes
) -> tuple[list[str], list[str]]:
    """(problems, notes) of the checkpoints' signatures under this public key. A
    signed checkpoint vouches for those before it (each holds its predecessor's link)."""
    try:
        key = signing.public_key_from_pem(public_key_pem)
    except signing.SigningKeyError as exc:
        return [f"the public key cannot be read: {exc}"], []
    problems: list[str] = []
    last_signed: int | None = None
    for signed in ordered:
        seq = signed.checkpoint.seq
        if signed.signature is None:
            continue
        if signing.verify(key, signed.checkpoint.link, signed.signature):
            last_signed = seq
        else:
            problems.append(f"checkpoint {seq}: its signature does not verify")
    if last_signed is None:
        if not problems:
            problems.append("no checkpoint is signed by this key")
        return problems, []
    if ordered[-1].checkpoint.seq > last_signed:
        return problems, [
            f"checkpoints after {last_signed} are not signed: the key vouches for none after it"
        ]
    return problems, []
