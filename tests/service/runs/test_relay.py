"""What a process relays of its runs: only the followed ones' receipts (their `seq`
numbers, in payloads PostgreSQL accepts) and their end, once; a leased watch (a
worker's, of a run on Temporal) only until it lapses."""

from __future__ import annotations

import orjson
import pytest

from app.service.runs import relay as relay_module
from app.service.runs.events import RunEventHub
from app.service.runs.relay import RUNS_CHANNEL, RunEventRelay
from app.store.notices import MAX_PAYLOAD_BYTES


class Sent:
    def __init__(self) -> None:
        self.notices: list[tuple[str, dict[str, object]]] = []

    def send(self, channel: str, payload: str) -> None:
        assert len(payload.encode()) <= MAX_PAYLOAD_BYTES
        self.notices.append((channel, orjson.loads(payload)))


def test_nothing_is_relayed_of_runs_nobody_follows() -> None:
    sent = Sent()
    relay = RunEventRelay(RunEventHub(), sent)
    relay.publish_receipts([{"run_id": "r1", "seq": 0}])
    relay.end("r1", "succeeded")
    assert sent.notices == []


def test_a_followed_runs_receipts_go_out_as_seq_numbers_then_its_end_once() -> None:
    sent = Sent()
    hub = RunEventHub()
    relay = RunEventRelay(hub, sent)
    relay.watch("r1")
    seqs = range(5000)  # a large batch: several notices, each within PostgreSQL's limit
    relay.publish_receipts([{"run_id": "r1", "seq": 1_000_000 + s} for s in seqs])
    relay.publish_receipts([{"run_id": "r2", "seq": 0}])
    with hub.subscribe("r1") as local:
        relay.end("r1", "cancelled")
        relay.end("r1", "cancelled")

    assert local.ended == "cancelled"  # the hub of this process hears it too
    assert {channel for channel, _ in sent.notices} == {RUNS_CHANNEL}
    receipts = [m for _, m in sent.notices if m["op"] == "receipts"]
    assert len(receipts) > 1
    assert [s for m in receipts for s in m["seqs"]] == [1_000_000 + s for s in seqs]  # type: ignore[attr-defined]
    assert {m["run"] for m in receipts} == {"r1"}
    assert sent.notices[-1] == (RUNS_CHANNEL, {"op": "end", "run": "r1", "status": "cancelled"})
    assert [m["op"] for _, m in sent.notices].count("end") == 1
    assert not relay.is_watched("r1")


class Clock:
    """`time.monotonic` of the relay, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_leased_watch_relays_until_it_lapses_and_a_watch_again_renews_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(relay_module.time, "monotonic", clock)
    sent = Sent()
    relay = RunEventRelay(RunEventHub(), sent)
    relay.watch("r1", lease_s=60)
    clock.now += 59
    relay.publish_receipts([{"run_id": "r1", "seq": 0}])
    relay.watch("r1", lease_s=60)  # renewed: 60 s from now
    clock.now += 59
    relay.publish_receipts([{"run_id": "r1", "seq": 1}])
    clock.now += 2
    relay.publish_receipts([{"run_id": "r1", "seq": 2}])
    relay.end("r1", "succeeded")

    assert [m for _, m in sent.notices] == [
        {"op": "receipts", "run": "r1", "seqs": [0]},
        {"op": "receipts", "run": "r1", "seqs": [1]},
    ]
    assert not relay.is_watched("r1")
