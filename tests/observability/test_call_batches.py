"""Call metrics are counted in batches: nothing lost, nothing counted twice, nothing left behind.

The engine's receipts and events for a few plans are recorded once, then
replayed into fresh sinks, as many times as a test needs.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.api.app import create_app
from app.contract import Contract, load_contract
from app.engine.engine import Engine
from app.engine.memory import MemoryCacheStore, MemoryReceiptSink
from app.engine.plan import PlanLimits, PlannedCall, SequentialPlan
from app.engine.ports import AuditEvent, CachedOutput
from app.engine.preflight import preflight_sequential
from app.engine.receipt import Receipt
from app.engine.run import RunIdentity
from app.observability.calls import MeteredSinks
from app.observability.exposition import flush_buffered, render_metrics
from app.observability.metrics import REGISTRY
from app.settings import Settings
from tests.observability.registry import OWNER, write_registry

Item = Receipt | AuditEvent
Readings = dict[tuple[str, tuple[tuple[str, str], ...]], float]

CALL_METRICS = (
    "toolloop_calls",
    "toolloop_call_",
    "toolloop_cache_",
    "toolloop_audit_events",
)


class _Recorder:
    """Records what the engine sends, in order, and keeps cache entries for hits."""

    def __init__(self) -> None:
        self.stream: list[Item] = []
        self.cache = MemoryCacheStore()
        self._receipts = MemoryReceiptSink(self.cache)

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        self.stream.append(receipt)
        return self._receipts.submit(receipt, cache_entry)

    def emit(self, event: AuditEvent) -> None:
        self.stream.append(event)


class _Downstream:
    """Where the metered sinks under test pass things on: nowhere."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        done: asyncio.Future[None] = (self._loop or asyncio.get_running_loop()).create_future()
        done.set_result(None)
        return done

    def emit(self, event: AuditEvent) -> None:
        pass


@pytest.fixture
def contract(tmp_path: Path) -> Contract:
    return load_contract([write_registry(tmp_path)])


async def _record(contract: Contract) -> list[Item]:
    """Every kind of call: succeeded, cache miss and hit, retried, failed, skipped, timed out."""
    recorder = _Recorder()
    engine = Engine(contract, receipts=recorder, audit=recorder, cache=recorder.cache)
    token, text = uuid.uuid4().hex, uuid.uuid4().hex
    plans = (
        (
            PlannedCall("a", "echo", {"text": "x"}),
            PlannedCall("b", "cached_echo", {"text": text}),
            PlannedCall("c", "cached_echo", {"text": text}),
            PlannedCall("d", "flaky", {"token": token, "failures": 1}),
            PlannedCall("e", "leak", {"text": "x"}),
            PlannedCall("f", "echo", {"text": "x"}),
        ),
        (PlannedCall("g", "hang", {"text": "x"}),),
    )
    try:
        for calls in plans:
            plan = SequentialPlan(OWNER, calls)
            checked = preflight_sequential(plan, contract, PlanLimits())
            identity = RunIdentity(str(uuid.uuid4()), OWNER, None, {}, contract.hash)
            await engine.run_sequential(identity, plan, checked.admitted)
    finally:
        await engine.aclose()
    return recorder.stream


def _as_new_calls(stream: Iterable[Item]) -> list[Item]:
    """The stream again, with a receipt id of its own for each call, as the engine gives."""
    ids: dict[str, str] = {}
    renamed: list[Item] = []
    for item in stream:
        if isinstance(item, Receipt):
            renamed.append(item._replace(receipt_id=ids.setdefault(item.receipt_id, _id())))
        elif "receipt_id" in item.detail:
            detail = {**item.detail, "receipt_id": ids.setdefault(item.detail["receipt_id"], _id())}
            renamed.append(item._replace(detail=detail))
        else:
            renamed.append(item)
    return renamed


def _id() -> str:
    return uuid.uuid4().hex


def _replay(sinks: MeteredSinks, stream: Iterable[Item]) -> None:
    for item in stream:
        if isinstance(item, Receipt):
            sinks.submit(item)
        else:
            sinks.emit(item)


def _samples(families: Iterable[Any]) -> Readings:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in families
        for sample in family.samples
        if sample.name.startswith(CALL_METRICS) and not sample.name.endswith("_created")
    }


def _readings() -> Readings:
    """The call metrics as the registry holds them now, without flushing anything."""
    return _samples(REGISTRY.collect())


def _scraped() -> Readings:
    return _samples(text_string_to_metric_families(render_metrics(None)[0].decode()))


def _delta(before: Readings, after: Readings) -> Readings:
    changed = {key: value - before.get(key, 0.0) for key, value in after.items()}
    return {key: value for key, value in changed.items() if value}


def _times(delta: Readings, factor: int) -> Readings:
    return {key: value * factor for key, value in delta.items()}


def _counter(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, tuple(sorted(labels.items())))


@pytest.fixture
async def stream(contract: Contract) -> list[Item]:
    return await _record(contract)


@pytest.fixture
async def one_replay(contract: Contract, stream: list[Item]) -> Readings:
    """What replaying the stream once adds, flushed at the end of the turn."""
    before = _readings()
    _replay(MeteredSinks(_Downstream(), _Downstream(), contract), _as_new_calls(stream))
    await asyncio.sleep(0)
    return _delta(before, _readings())


async def test_one_replay_counts_what_the_engine_did(one_replay: Readings) -> None:
    def calls(tool: str, status: str) -> float:
        return one_replay[_counter("toolloop_calls_total", tool=tool, owner=OWNER, status=status)]

    assert (calls("echo", "succeeded"), calls("echo", "skipped")) == (1, 1)
    assert (calls("cached_echo", "succeeded"), calls("hang", "timed_out")) == (2, 1)
    assert one_replay[_counter("toolloop_call_errors_total", tool="leak", kind="exception")] == 1
    assert one_replay[_counter("toolloop_call_retries_total", tool="flaky")] == 1
    assert one_replay[_counter("toolloop_call_timeouts_total", tool="hang")] == 1
    assert one_replay[_counter("toolloop_cache_misses_total", tool="cached_echo")] == 1
    assert one_replay[_counter("toolloop_cache_hits_total", tool="cached_echo")] == 1
    assert one_replay[_counter("toolloop_call_duration_seconds_count", tool="echo")] == 1
    assert one_replay[_counter("toolloop_call_admission_wait_seconds_count", tool="leak")] == 1
    assert one_replay[_counter("toolloop_audit_events_total", kind="call.started")] == 5
    # Every started call settled: the in-flight gauge is back where it was.
    assert not [key for key in one_replay if key[0] == "toolloop_calls_in_flight"]


async def test_many_calls_in_one_turn_each_count_once(
    contract: Contract, stream: list[Item], one_replay: Readings
) -> None:
    sinks = MeteredSinks(_Downstream(), _Downstream(), contract)
    before = _readings()

    for _ in range(50):
        _replay(sinks, _as_new_calls(stream))
    await asyncio.sleep(0)

    assert _delta(before, _readings()) == pytest.approx(_times(one_replay, 50))


async def test_calls_over_many_turns_each_count_once(
    contract: Contract, stream: list[Item], one_replay: Readings
) -> None:
    sinks = MeteredSinks(_Downstream(), _Downstream(), contract)
    before = _readings()

    for _ in range(20):
        for item in _as_new_calls(stream):
            _replay(sinks, [item])
            await asyncio.sleep(0)

    assert _delta(before, _readings()) == pytest.approx(_times(one_replay, 20))


async def test_in_flight_counts_started_calls_until_their_receipts(
    contract: Contract, stream: list[Item]
) -> None:
    sinks = MeteredSinks(_Downstream(), _Downstream(), contract)
    first_echo = stream[:3]  # call.started, call.finished, the receipt
    assert [type(item) for item in first_echo] == [AuditEvent, AuditEvent, Receipt]
    calls = [_as_new_calls(first_echo) for _ in range(3)]
    key = _counter("toolloop_calls_in_flight", tool="echo")
    waits = _counter("toolloop_call_admission_wait_seconds_count", tool="echo")
    before = _readings()

    for call in calls:
        _replay(sinks, call[:1])
    await asyncio.sleep(0)
    started = _delta(before, _readings())
    _replay(sinks, calls[0][1:])
    await asyncio.sleep(0)
    one_settled = _delta(before, _readings())
    _replay(sinks, calls[1][1:] + calls[2][1:])
    await asyncio.sleep(0)
    all_settled = _delta(before, _readings())

    assert (started.get(key), started.get(waits)) == (3, None)
    assert (one_settled.get(key), one_settled.get(waits)) == (2, 1)
    assert (all_settled.get(key), all_settled.get(waits)) == (None, 3)


async def test_a_scrape_right_after_the_calls_sees_them_all(
    contract: Contract, stream: list[Item], one_replay: Readings
) -> None:
    sinks = MeteredSinks(_Downstream(), _Downstream(), contract)
    before = _scraped()

    for _ in range(10):
        _replay(sinks, _as_new_calls(stream))
    after = _scraped()  # in the same turn

    assert _delta(before, after) == pytest.approx(_times(one_replay, 10))


async def test_flush_counts_everything_kept_at_once(
    contract: Contract, stream: list[Item], one_replay: Readings
) -> None:
    sinks = MeteredSinks(_Downstream(), _Downstream(), contract)
    before = _readings()

    _replay(sinks, _as_new_calls(stream))
    sinks.flush()
    flushed = _readings()
    await asyncio.sleep(0)

    assert _delta(before, flushed) == pytest.approx(one_replay)
    assert _readings() == flushed


async def test_flushes_from_another_thread_lose_nothing(
    contract: Contract, stream: list[Item], one_replay: Readings
) -> None:
    sinks = MeteredSinks(_Downstream(), _Downstream(), contract)
    turns = [[item for _ in range(50) for item in _as_new_calls(stream)] for _ in range(40)]
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            flush_buffered()

    before = _readings()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for turn in turns:
            _replay(sinks, turn)
            await asyncio.sleep(0)
    finally:
        stop.set()
        scraper.join()
        sys.setswitchinterval(interval)
    await asyncio.sleep(0)

    assert _delta(before, _readings()) == pytest.approx(_times(one_replay, 2000))


async def test_names_outside_the_contract_count_as_other(
    contract: Contract, stream: list[Item]
) -> None:
    sinks = MeteredSinks(_Downstream(), _Downstream(), contract)
    strangers = [
        item._replace(tool=uuid.uuid4().hex, owner=uuid.uuid4().hex)
        for item in stream
        if isinstance(item, Receipt)
    ]
    key = _counter("toolloop_calls_total", tool="other", owner="other", status="succeeded")
    before = _readings()

    _replay(sinks, strangers)
    await asyncio.sleep(0)

    assert _delta(before, _readings())[key] == 4


def test_without_a_running_loop_each_call_counts_at_once(contract: Contract) -> None:
    stream = asyncio.run(_record(contract))
    loop = asyncio.new_event_loop()
    try:
        sinks = MeteredSinks(_Downstream(loop), _Downstream(loop), contract)
        before = _readings()
        _replay(sinks, _as_new_calls(stream))
        once = _delta(before, _readings())
        _replay(sinks, _as_new_calls(stream))
        twice = _delta(before, _readings())
    finally:
        loop.close()

    assert once[_counter("toolloop_calls_total", tool="echo", owner=OWNER, status="succeeded")] == 1
    assert twice == pytest.approx(_times(once, 2))


async def test_closing_the_service_flushes_its_call_metrics(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = create_app(settings)
    flushed: list[None] = []
    async with service.router.lifespan_context(service):
        sinks = service.state.runtime.call_metrics
        flush = sinks.flush

        def counted_flush() -> None:
            flushed.append(None)
            flush()

        monkeypatch.setattr(sinks, "flush", counted_flush)

    assert flushed
