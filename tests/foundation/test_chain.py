from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone

from app.foundation.chain import (
    AUDIT_EVENTS,
    CHECKPOINT_GENESIS,
    RECEIPTS,
    Checkpoint,
    Entry,
    RunHead,
    chain_id_of,
    checkpoint_link,
    checkpoint_payload,
    entry_content,
    entry_digest,
    genesis,
    head,
    link,
    rfc3339,
    row_digest,
    verify_chain,
    verify_checkpoints,
)

AT = datetime(2026, 12, 7, 12, 30, 45, 123456, tzinfo=UTC)


def receipt_row(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": "rcp_1",
        "run_id": "run_1",
        "seq": 1,
        "output": {"b": 1, "a": [1.5, None]},
        "output_truncated": False,
        "cache_hit": True,
        "admission_wait_ms": 0.0,
        "started_at": AT,
        "finished_at": None,
        "created_at": AT,
    }
    row.update(changes)
    return row


def chain_of(chain_id: str, digests: list[str]) -> list[Entry]:
    entries = []
    previous = genesis(chain_id)
    for position, digest in enumerate(digests, start=1):
        previous = link(previous, digest)
        entries.append(Entry(position, digest, previous))
    return entries


def digests(count: int) -> list[str]:
    return [hashlib.sha256(str(n).encode()).hexdigest() for n in range(count)]


def test_content_is_canonical_json_with_the_table_and_rfc3339_times() -> None:
    content = entry_content(RECEIPTS, receipt_row())
    assert content == (
        b'{"admission_wait_ms":0.0,"cache_hit":true,"created_at":"2026-12-07T12:30:45.123456Z",'
        b'"finished_at":null,"id":"rcp_1","output":{"a":[1.5,null],"b":1},'
        b'"output_truncated":false,"run_id":"run_1","seq":1,'
        b'"started_at":"2026-12-07T12:30:45.123456Z","table":"receipts"}'
    )
    assert entry_digest(content) == hashlib.sha256(content).hexdigest()


def test_a_row_read_back_gives_the_bytes_it_was_written_with() -> None:
    written = receipt_row()
    sqlite_read = receipt_row(
        started_at="2026-12-07 12:30:45.123456",
        created_at="2026-12-07 12:30:45.123456",
        output_truncated=0,
        cache_hit=1,
        admission_wait_ms=0,
        output={"a": [1.5, None], "b": 1},
        chain_seq=4,
        chain_link="ab" * 32,
    )
    other_zone = timezone(timedelta(hours=2))
    postgres_read = receipt_row(started_at=AT.astimezone(other_zone), created_at=AT)
    naive = receipt_row(started_at=AT.replace(tzinfo=None), created_at=AT.replace(tzinfo=None))
    expected = entry_content(RECEIPTS, written)
    for row in (sqlite_read, postgres_read, naive):
        assert entry_content(RECEIPTS, row) == expected


def test_audit_ids_are_not_content_but_receipt_ids_are() -> None:
    audit = {"id": 7, "run_id": None, "at": AT, "kind": "k", "detail": {}}
    assert entry_content(AUDIT_EVENTS, audit) == entry_content(AUDIT_EVENTS, {**audit, "id": 8})
    assert row_digest(RECEIPTS, receipt_row()) != row_digest(RECEIPTS, receipt_row(id="rcp_2"))


def test_numbers_keep_their_form_and_float_columns_read_back_as_floats() -> None:
    as_float = row_digest(RECEIPTS, receipt_row(output={"n": 2.0}))
    assert as_float != row_digest(RECEIPTS, receipt_row(output={"n": 2}))
    assert row_digest(RECEIPTS, receipt_row(admission_wait_ms=0)) == row_digest(
        RECEIPTS, receipt_row(admission_wait_ms=0.0)
    )
    huge = {"n": 2**70}  # beyond orjson's integers: written exactly all the same
    assert b'"n":1180591620717411303424' in entry_content(RECEIPTS, receipt_row(output=huge))


def test_the_table_is_part_of_the_content() -> None:
    row = {"run_id": "run_1", "kind": "x"}
    assert entry_content(AUDIT_EVENTS, row) != entry_content(RECEIPTS, row)


def test_every_changed_column_changes_the_digest() -> None:
    base = row_digest(RECEIPTS, receipt_row())
    for changes in (
        {"seq": 2},
        {"output": {"b": 2, "a": [1.5, None]}},
        {"cache_hit": False},
        {"started_at": AT + timedelta(microseconds=1)},
        {"finished_at": AT},
        {"extra": None},
    ):
        assert row_digest(RECEIPTS, receipt_row(**changes)) != base, changes


def test_genesis_and_link_follow_the_spec() -> None:
    assert genesis("run_1") == hashlib.sha256(b"toolloop-chain-v1\x00run_1").hexdigest()
    prev, digest = "00" * 32, "11" * 32
    assert link(prev, digest) == hashlib.sha256(bytes(32) + b"\x11" * 32).hexdigest()


def test_rows_without_a_run_are_chained_by_their_utc_day() -> None:
    late = datetime(2026, 12, 7, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    assert chain_id_of(None, late) == "day:2026-12-08"
    assert chain_id_of("run_1", late) == "run_1"
    assert rfc3339(late) == "2026-12-08T01:30:00.000000Z"


def test_an_intact_chain_has_no_problems() -> None:
    entries = chain_of("run_1", digests(5))
    assert verify_chain("run_1", entries) == []
    assert verify_chain("run_1", list(reversed(entries))) == []
    assert head("run_1", entries) == (5, entries[-1].link)
    assert head("run_1", []) == (0, genesis("run_1"))


def test_a_chain_verifies_only_under_its_own_id() -> None:
    entries = chain_of("run_1", digests(2))
    assert verify_chain("run_2", entries) == ["run_2: link mismatch at position 1"]


def test_a_changed_row_is_a_link_mismatch_at_its_position() -> None:
    entries = chain_of("run_1", digests(4))
    changed = list(entries)
    changed[2] = Entry(3, "ff" * 32, entries[2].link)
    assert verify_chain("run_1", changed) == ["run_1: link mismatch at position 3"]


def test_a_removed_row_is_a_missing_position() -> None:
    entries = chain_of("run_1", digests(4))
    assert verify_chain("run_1", entries[:1] + entries[2:]) == ["run_1: missing position 2"]


def test_reordered_rows_break_the_links() -> None:
    values = digests(3)
    entries = chain_of("run_1", values)
    swapped = [
        entries[0],
        Entry(2, values[2], entries[1].link),
        Entry(3, values[1], entries[2].link),
    ]
    assert verify_chain("run_1", swapped) == [
        "run_1: link mismatch at position 2",
        "run_1: link mismatch at position 3",
    ]


def test_an_inserted_row_is_a_duplicate_or_a_mismatch() -> None:
    entries = chain_of("run_1", digests(3))
    assert verify_chain("run_1", [*entries, Entry(2, "aa" * 32, "bb" * 32)]) == [
        "run_1: duplicate position 2"
    ]
    assert verify_chain("run_1", [*entries, Entry(4, "aa" * 32, "bb" * 32)]) == [
        "run_1: link mismatch at position 4"
    ]


def test_a_replaced_row_stays_verifiable_as_a_superseded_entry() -> None:
    values = digests(4)
    entries = chain_of("run_1", values)
    # Position 2's row was replaced: its row now sits at position 4.
    current = [entries[0], entries[2], entries[3]]
    assert verify_chain("run_1", current, superseded=[entries[1]]) == []
    assert verify_chain("run_1", current) == ["run_1: missing position 2"]
    forged = Entry(2, "ee" * 32, entries[1].link)
    assert verify_chain("run_1", current, superseded=[forged]) == [
        "run_1: link mismatch at position 2"
    ]


def test_checkpoints_chain_the_heads_of_runs() -> None:
    runs = (RunHead("run_b", 3, "bb" * 32), RunHead("run_a", 1, "aa" * 32))
    payload = checkpoint_payload(1, AT, runs)
    assert payload == (
        b'{"created_at":"2026-12-07T12:30:45.123456Z","runs":['
        b'{"head":"' + b"aa" * 32 + b'","length":1,"run_id":"run_a"},'
        b'{"head":"' + b"bb" * 32 + b'","length":3,"run_id":"run_b"}],"seq":1}'
    )
    assert hashlib.sha256(b"toolloop-checkpoints-v1").hexdigest() == CHECKPOINT_GENESIS
    first_link = checkpoint_link(CHECKPOINT_GENESIS, payload)
    assert (
        first_link
        == (
            hashlib.sha256(bytes.fromhex(CHECKPOINT_GENESIS) + hashlib.sha256(payload).digest())
        ).hexdigest()
    )
    first = Checkpoint(1, AT, runs, CHECKPOINT_GENESIS, first_link)
    later = AT + timedelta(hours=1)
    second_runs = (RunHead("run_c", 2, "cc" * 32),)
    second_link = checkpoint_link(first_link, checkpoint_payload(2, later, second_runs))
    second = Checkpoint(2, later, second_runs, first_link, second_link)
    assert verify_checkpoints([first, second]) == []
    assert verify_checkpoints([second]) == []

    altered = Checkpoint(2, later, (RunHead("run_c", 1, "cc" * 32),), first_link, second_link)
    assert verify_checkpoints([first, altered]) == ["checkpoint 2: link mismatch"]
    unlinked = Checkpoint(2, later, second_runs, CHECKPOINT_GENESIS, second_link)
    assert verify_checkpoints([first, unlinked]) == [
        "checkpoint 2: prev is not checkpoint 1",
        "checkpoint 2: link mismatch",
    ]
    assert verify_checkpoints([second, first])[0] == "checkpoint 1: follows 2"
