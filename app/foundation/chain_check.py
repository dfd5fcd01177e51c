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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.foundation import chain as links
from app.foundation import signing

RECEIPTS = links.RECEIPTS
AUDIT_EVENTS = links.AUDIT_EVENTS
# Where a replacement's audit row records the entry of the receipt it replaced:
# `{"seq", "digest", "link"}` under this key of its detail.
SUPERSEDED_KEY = "chain"


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
        return links.verify_chain(self.chain_id, current, self.superseded)


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
    return links.DAY_CHAIN_PREFIX + str(row["at"])[:10]


def chains_of(
    receipts: Iterable[Mapping[str, Any]], audit: Iterable[Mapping[str, Any]]
) -> dict[str, Chain]:
    chains: dict[str, Chain] = {}
    for table, rows in ((RECEIPTS, receipts), (AUDIT_EVENTS, audit)):
        for row in rows:
            chain_id = chain_of_row(row)
            chain = chains.get(chain_id) or chains.setdefault(chain_id, Chain(chain_id))
            if table == AUDIT_EVENTS:
                chain.superseded.extend(_superseded(row))
            if row.get("chain_seq") is None:
                chain.unchained += 1
                continue
            chain.entries.append(
                StoredEntry(
                    position=int(row["chain_seq"]),
                    table=table,
                    row_id=str(row["id"]),
                    digest=links.row_digest(table, row),
                    link=str(row["chain_link"]),
                )
            )
    for chain in chains.values():
        chain.entries.sort(key=lambda entry: entry.position)
    return chains


def _superseded(row: Mapping[str, Any]) -> list[links.Entry]:
    """The former entry a replacement's audit row records, if it is one."""
    detail = row.get("detail")
    recorded = detail.get(SUPERSEDED_KEY) if isinstance(detail, dict) else None
    if not isinstance(recorded, dict):
        return []
    return [links.Entry(int(recorded["seq"]), str(recorded["digest"]), str(recorded["link"]))]


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
    ordered = sorted(checkpoints, key=lambda checkpoint: int(checkpoint["seq"]))
    problems.extend(_checkpoint_chain_problems(ordered))
    covered = _coverage_problems(chains, ordered, problems)
    for chain_id in sorted(set(chains) - covered):
        if not chain_id.startswith("day:"):
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


def _checkpoint_chain_problems(ordered: Sequence[Mapping[str, Any]]) -> list[str]:
    checkpoints: list[links.Checkpoint] = []
    for row in ordered:
        try:
            checkpoints.append(_checkpoint(row))
        except (KeyError, TypeError, ValueError):
            return [f"checkpoint {row['seq']}: its content cannot be read"]
    return links.verify_checkpoints(checkpoints)


def _checkpoint(row: Mapping[str, Any]) -> links.Checkpoint:
    return links.Checkpoint(
        seq=int(row["seq"]),
        created_at=datetime.fromisoformat(str(row["created_at"]).replace("Z", "+00:00")),
        runs=tuple(
            links.RunHead(str(held["run_id"]), int(held["length"]), str(held["head"]))
            for held in row["runs"]
        ),
        prev=str(row["prev"]),
        link=str(row["link"]),
    )


def _coverage_problems(
    chains: Mapping[str, Chain], ordered: Sequence[Mapping[str, Any]], problems: list[str]
) -> set[str]:
    """Check each run's chain against what the checkpoints hold of it; the runs covered."""
    covered: set[str] = set()
    for checkpoint in ordered:
        for held in checkpoint["runs"]:
            chain = chains.get(str(held["run_id"]))
            if chain is None:
                continue
            covered.add(chain.chain_id)
            length, head = int(held["length"]), str(held["head"])
            where = f"{chain.chain_id}: checkpoint {checkpoint['seq']} holds {length} entries"
            if length > chain.length:
                problems.append(f"{where}, the rows only {chain.length}: rows removed from its end")
            elif (chain.link_at(length) or links.genesis(chain.chain_id)) != head:
                problems.append(f"{where} ending in another head than the rows'")
    return covered


def _signature_findings(
    ordered: Sequence[Mapping[str, Any]], public_key_pem: bytes
) -> tuple[list[str], list[str]]:
    """(problems, notes) of the checkpoints' signatures under this public key. A
    signed checkpoint vouches for those before it (each holds its predecessor's link)."""
    try:
        key = signing.public_key_from_pem(public_key_pem)
    except signing.SigningKeyError as exc:
        return [f"the public key cannot be read: {exc}"], []
    problems: list[str] = []
    last_signed: int | None = None
    for checkpoint in ordered:
        signature = checkpoint.get("signature")
        if signature is None:
            continue
        if signing.verify(key, str(checkpoint["link"]), str(signature)):
            last_signed = int(checkpoint["seq"])
        else:
            problems.append(f"checkpoint {checkpoint['seq']}: its signature does not verify")
    if last_signed is None:
        if not problems:
            problems.append("no checkpoint is signed by this key")
        return problems, []
    unsigned_after = [c for c in ordered if int(c["seq"]) > last_signed]
    notes = (
        [f"checkpoints after {last_signed} are not signed: the key vouches for none after it"]
        if unsigned_after
        else []
    )
    return problems, notes
