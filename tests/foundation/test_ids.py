import os
import time
import uuid
from collections.abc import Callable

import pytest

from app.foundation import ids
from app.foundation.ids import new_receipt_id, new_request_id, new_run_id
from tests.support.waiting import wait_for_sync


@pytest.mark.parametrize("make", [new_receipt_id, new_run_id, new_request_id])
def test_ids_differ_in_a_forked_child(make: Callable[[], str]) -> None:
    make()  # the parent now holds ids drawn ahead of use
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.write(write, make().encode())
        os._exit(0)
    os.close(write)
    theirs = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(child, 0)
    ours = make()
    assert theirs != ours
    assert theirs[-20:] != ours[-20:]  # the random part, not only the time


def test_request_ids_are_distinct_128_bit_hex_across_batches() -> None:
    made = [new_request_id() for _ in range(300)]  # several batches of 64
    assert len(set(made)) == len(made)
    assert all(len(request_id) == 32 and int(request_id, 16) >= 0 for request_id in made)


def test_receipt_ids_are_distinct_128_bit_hex_across_batches() -> None:
    made = [new_receipt_id() for _ in range(300)]  # several batches of 64
    assert len(set(made)) == len(made)
    assert len({receipt_id[12:] for receipt_id in made}) == len(made)
    for receipt_id in made:
        assert len(receipt_id) == 32
        assert int(receipt_id, 16) >= 0


def test_a_receipt_id_leads_with_its_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    receipt_id = new_receipt_id()
    after = time.time_ns() // 1_000_000
    assert before <= int(receipt_id[:12], 16) <= after


def test_receipt_ids_of_later_milliseconds_sort_after_earlier_ones() -> None:
    earlier = [new_receipt_id() for _ in range(5)]
    last_ms = int(max(earlier)[:12], 16)
    wait_for_sync(lambda: time.time_ns() // 1_000_000 > last_ms, "a later millisecond", every_s=0)
    later = [new_receipt_id() for _ in range(5)]
    assert max(earlier) < min(later)


def test_receipt_ids_take_the_time_of_the_call_not_of_the_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter([1_000_000_000, 1_000_000_000, 5_000_000_000])
    monkeypatch.setattr(ids, "time_ns", lambda: next(clock))
    first, second, third = new_receipt_id(), new_receipt_id(), new_receipt_id()
    assert first[:12] == second[:12] == f"{1000:012x}"
    assert third[:12] == f"{5000:012x}"


def test_run_ids_are_uuid_version_7_leading_with_their_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    made = [new_run_id() for _ in range(200)]
    after = time.time_ns() // 1_000_000
    assert len(set(made)) == len(made)
    for run_id in made:
        parsed = uuid.UUID(run_id)
        assert str(parsed) == run_id
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
        assert before <= parsed.int >> 80 <= after


def test_run_ids_keep_74_random_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids, "time_ns", lambda: 0)
    ids._drop_drawn()
    monkeypatch.setattr(ids.os, "urandom", lambda n: b"\xff" * n)
    every_bit = uuid.UUID(new_run_id()).int
    ids._drop_drawn()
    monkeypatch.setattr(ids.os, "urandom", lambda n: b"\x00" * n)
    no_bit = uuid.UUID(new_run_id()).int
    ids._drop_drawn()
    # What differs is the random part: everything but the time, version and variant.
    assert bin(every_bit ^ no_bit).count("1") == 74
