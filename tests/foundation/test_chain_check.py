"""The read side's checks over rows in their stored form, chained here with the chain
module's own functions (the end-to-end tests: tests/test_audit_commands.py)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.foundation import chain as links
from app.foundation import signing
from app.foundation.chain_check import AUDIT_EVENTS, RECEIPTS, chains_of, check

RUN = "run-1"
AT = "2026-12-07T10:00:00.000000Z"


def _receipt(call_key: str) -> dict[str, Any]:
    return {
        "id": f"r-{call_key}",
        "run_id": RUN,
        "seq": ord(call_key),
        "call_key": call_key,
        "status": "succeeded",
        "output": {"n": 1.5},
        "cache_hit": False,
        "started_at": AT,
    }


def _audit(number: int) -> dict[str, Any]:
    return {"id": number, "run_id": RUN, "at": AT, "kind": "k", "detail": {"n": number}}


def chained() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(receipts, audit rows) of one run, interleaved in its chain."""
    rows = [
        (AUDIT_EVENTS, _audit(1)),
        (RECEIPTS, _receipt("a")),
        (RECEIPTS, _receipt("b")),
        (AUDIT_EVENTS, _audit(2)),
    ]
    previous = links.genesis(RUN)
    for position, (table, row) in enumerate(rows, start=1):
        previous = links.link(previous, links.row_digest(table, row))
        row.update(chain_seq=position, chain_link=previous)
    return [r for t, r in rows if t == RECEIPTS], [r for t, r in rows if t == AUDIT_EVENTS]


def checkpoint(
    receipts: list[dict[str, Any]], audit: list[dict[str, Any]], key: Ed25519PrivateKey | None
) -> dict[str, Any]:
    chain = chains_of(receipts, audit)[RUN]
    created = datetime(2026, 12, 7, 11, tzinfo=UTC)
    runs = [links.RunHead(RUN, chain.length, chain.head)]
    payload = links.checkpoint_payload(1, created, runs)
    link = links.checkpoint_link(links.CHECKPOINT_GENESIS, payload)
    signature = None if key is None else base64.b64encode(key.sign(bytes.fromhex(link))).decode()
    return {
        "seq": 1,
        "created_at": links.rfc3339(created),
        "runs": [{"run_id": RUN, "length": chain.length, "head": chain.head}],
        "prev": links.CHECKPOINT_GENESIS,
        "link": link,
        "signature": signature,
        "key_id": None if key is None else signing.key_id(key.public_key()),
    }


def test_an_intact_chain_with_its_checkpoint_has_no_problem() -> None:
    receipts, audit = chained()

    findings = check(chains_of(receipts, audit), [checkpoint(receipts, audit, None)])

    assert findings.problems == []
    assert findings.notes == ["signatures not checked: no public key given"]


def test_a_run_no_checkpoint_holds_is_noted() -> None:
    receipts, audit = chained()

    findings = check(chains_of(receipts, audit), [])

    assert findings.problems == []
    assert any("no checkpoint covers it yet" in note for note in findings.notes)


def test_rows_removed_from_the_end_disagree_with_the_checkpoint() -> None:
    receipts, audit = chained()
    held = checkpoint(receipts, audit, None)

    findings = check(chains_of(receipts, audit[:-1]), [held])

    assert findings.problems == [
        f"{RUN}: checkpoint 1 holds 4 entries, the rows only 3: rows removed from its end"
    ]


def test_a_changed_checkpoint_breaks_its_link() -> None:
    receipts, audit = chained()
    held = checkpoint(receipts, audit, None)
    held["runs"] = [{"run_id": "another", "length": 1, "head": "00" * 32}]

    assert check(chains_of(receipts, audit), [held]).problems == ["checkpoint 1: link mismatch"]


def test_a_changed_row_breaks_its_chain() -> None:
    receipts, audit = chained()
    receipts[0]["output"] = {"n": 2}

    assert check(chains_of(receipts, audit), []).problems == [f"{RUN}: link mismatch at position 2"]


def test_a_replaced_receipt_s_former_entry_stays_verifiable() -> None:
    receipts, audit = chained()
    former = receipts[0]
    replacement = dict(_receipt("a"), status="failed", chain_seq=5)
    replacement_audit = dict(
        _audit(3),
        chain_seq=6,
        detail={
            "chain": {
                "seq": 2,
                "digest": links.row_digest(RECEIPTS, former),
                "link": former["chain_link"],
            }
        },
    )
    replacement["chain_link"] = links.link(
        audit[-1]["chain_link"], links.row_digest(RECEIPTS, replacement)
    )
    replacement_audit["chain_link"] = links.link(
        replacement["chain_link"], links.row_digest(AUDIT_EVENTS, replacement_audit)
    )

    chains = chains_of([replacement, receipts[1]], [*audit, replacement_audit])

    assert check(chains, []).problems == []
    assert chains[RUN].length == 6


@pytest.mark.parametrize("signed_by", ["operator", "stranger", "nobody"])
def test_signatures_verify_with_the_operator_s_key_only(signed_by: str) -> None:
    operator = Ed25519PrivateKey.generate()
    key = {"operator": operator, "stranger": Ed25519PrivateKey.generate(), "nobody": None}
    receipts, audit = chained()
    held = checkpoint(receipts, audit, key[signed_by])

    findings = check(
        chains_of(receipts, audit), [held], public_key_pem=signing.public_pem(operator.public_key())
    )

    expected = {
        "operator": [],
        "stranger": ["checkpoint 1: its signature does not verify"],
        "nobody": ["no checkpoint is signed by this key"],
    }
    assert findings.problems == expected[signed_by]


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("chain_link", "not a sha-256"),
        ("chain_seq", "2"),
        ("started_at", "yesterday"),
    ],
)
def test_a_row_that_cannot_be_read_is_a_problem_not_a_crash(column: str, value: Any) -> None:
    receipts, audit = chained()
    receipts[0][column] = value

    problems = check(chains_of(receipts, audit), []).problems

    assert problems[0].startswith(f"{RUN}: receipts row r-a: ")
    assert f"{RUN}: missing position 2" in problems


def test_a_checkpoint_that_cannot_be_read_is_a_problem_not_a_crash() -> None:
    receipts, audit = chained()
    held = checkpoint(receipts, audit, None)
    held["runs"] = [{"run_id": RUN}]

    findings = check(chains_of(receipts, audit), [held])

    assert findings.problems == ["checkpoint 1: its content cannot be read"]
