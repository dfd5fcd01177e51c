"""`toolloop audit verify BUNDLE [--public-key PEM]`: check an audit bundle offline.

Nothing here reaches a database or reads the service's settings: it imports the
standard library and `app.foundation` only (which use orjson and cryptography),
so a bundle verifies on any machine with the package installed.

Prints each problem on its own line, then what the bundle cannot vouch for
(`note:` lines). Exit 0: intact; 1: problems found; 2: the bundle (or the
public key) cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from app.foundation.audit_bundle import Bundle, BundleUnreadable, read_bundle
from app.foundation.chain_check import Chain, Findings, chain_of_row, chains_of, check

INTACT = 0
PROBLEMS = 1
UNREADABLE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, help="a bundle `toolloop audit export` wrote")
    parser.add_argument(
        "--public-key",
        type=Path,
        metavar="PEM",
        help="the Ed25519 public key (PEM) the checkpoints' signatures must verify with",
    )


def verify_bundle(bundle: Bundle, public_key_pem: bytes | None) -> Findings:
    chains = chains_of(bundle.receipts, bundle.audit)
    listed = bundle.header["chains"]
    unlisted = sorted(set(chains) - set(listed))
    empty = [chain_id for chain_id in listed if chain_id not in chains]
    for chain_id in empty:
        # Checked against the checkpoints all the same: one may hold rows of it.
        chains[chain_id] = Chain(chain_id)
    findings = check(chains, bundle.checkpoints, public_key_pem=public_key_pem)
    problems = list(findings.problems)
    if not bundle.complete:
        problems.insert(0, "the bundle ends early: its end line is missing or counts other lines")
    problems.extend(
        f"{chain_id}: rows of a chain the header does not list" for chain_id in unlisted
    )
    notes = [f"{chain_id}: no row of it is here" for chain_id in empty]
    return Findings(problems, [*notes, *findings.notes])


def verify_path(bundle_path: Path, public_key_path: Path | None) -> tuple[int, list[str]]:
    """(exit status, lines to print)."""
    try:
        public_key = None if public_key_path is None else public_key_path.read_bytes()
    except OSError as exc:
        return UNREADABLE, [f"cannot read the public key {public_key_path}: {_reason(exc)}"]
    try:
        with bundle_path.open("rb") as lines:
            bundle = read_bundle(lines)
    except OSError as exc:
        return UNREADABLE, [f"cannot read {bundle_path}: {_reason(exc)}"]
    except BundleUnreadable as exc:
        return UNREADABLE, [f"{bundle_path} is not an audit bundle: {exc}"]
    findings = verify_bundle(bundle, public_key)
    rows = len(bundle.receipts) + len(bundle.audit)
    chains = {chain_of_row(row) for row in (*bundle.receipts, *bundle.audit)}
    summary = f"{len(chains)} chain(s), {rows} row(s), {len(bundle.checkpoints)} checkpoint(s)"
    notes = [f"note: {note}" for note in findings.notes]
    if findings.intact:
        return INTACT, [f"intact: {summary}", *notes]
    problems = [f"problem: {problem}" for problem in findings.problems]
    return PROBLEMS, [*problems, f"{len(problems)} problem(s) in {summary}", *notes]


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def run(args: argparse.Namespace) -> int:
    status, lines = verify_path(args.bundle, args.public_key)
    out = sys.stderr if status == UNREADABLE else sys.stdout
    prefix = "toolloop: " if status == UNREADABLE else ""
    for text in lines:
        print(prefix + text, file=out)
    return status


def main(argv: Sequence[str]) -> int:
    """`toolloop audit verify`'s own parser: used before the rest of the CLI is imported."""
    parser = argparse.ArgumentParser(
        prog="toolloop audit verify", description="check an audit bundle offline"
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
