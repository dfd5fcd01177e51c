"""The result cache: hits, misses, TTL, invalidation by definition, and what is never cached."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.engine.memory import MemoryCacheStore
from app.engine.ports import AuditKind
from app.engine.receipt import Status
from tests.engine import engine_tools
from tests.engine.harness import build_harness, tool, write_contract

CACHED = {"cacheable": True, "effect": "read"}


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


async def test_hit_executes_nothing_and_names_its_source_receipt(make_harness: Any) -> None:
    harness = make_harness({"c": tool("cached_value", **CACHED)})

    first = (await harness.sequential([("1", "c", {"text": "a"})])).receipts[0]
    await harness.engine.drain()
    second = (await harness.sequential([("1", "c", {"text": "a"})])).receipts[0]

    assert first.cache_hit is False
    assert second.status is Status.SUCCEEDED
    assert second.cache_hit is True
    assert second.attempts == 0
    assert second.output == {"text": "A"}
    assert second.cache_source_receipt_id == first.receipt_id
    assert second.fingerprint == first.fingerprint
    assert second.receipt_id != first.receipt_id
    assert engine_tools.STATE.calls["c"] == 1
    (hit,) = harness.events(AuditKind.CALL_CACHE_HIT)
    assert hit.detail["source_receipt_id"] == first.receipt_id
    assert harness.events(AuditKind.CALL_STARTED)[-1].detail["receipt_id"] == first.receipt_id


async def test_different_arguments_miss(make_harness: Any) -> None:
    harness = make_harness({"c": tool("cached_value", **CACHED)})

    await harness.sequential([("1", "c", {"text": "a"})])
    await harness.engine.drain()
    receipt = (await harness.sequential([("1", "c", {"text": "b"})])).receipts[0]

    assert receipt.cache_hit is False
    assert engine_tools.STATE.calls["c"] == 2


async def test_entries_expire_after_their_ttl(make_harness: Any) -> None:
    clock = FakeClock()
    harness = make_harness({"c": tool("cached_value", cache_ttl_s=60, **CACHED)}, clock=clock)

    await harness.sequential([("1", "c", {"text": "a"})])
    await harness.engine.drain()
    clock.advance(59)
    within = (await harness.sequential([("1", "c", {"text": "a"})])).receipts[0]
    clock.advance(1)
    expired = (await harness.sequential([("1", "c", {"text": "a"})])).receipts[0]
    await harness.engine.drain()

    assert within.cache_hit is True
    assert expired.cache_hit is False
    assert engine_tools.STATE.calls["c"] == 2
    (entry,) = harness.cache.entries.values()
    assert entry.source_receipt_id == expired.receipt_id
    assert entry.expires_at == clock.now + timedelta(seconds=60)


async def test_a_changed_tool_definition_never_serves_the_old_result(tmp_path: Any) -> None:
    store = MemoryCacheStore()
    before = write_contract(tmp_path, {"c": tool("cached_value", **CACHED)}, name="before.yml")
    after = write_contract(
        tmp_path,
        {"c": tool("cached_value", description="Now different.", **CACHED)},
        name="after.yml",
    )
    assert before.tools["c"].definition_hash != after.tools["c"].definition_hash
    old = build_harness(before, cache=store)
    new = build_harness(after, cache=store)
    try:
        await old.sequential([("1", "c", {"text": "a"})])
        await old.engine.drain()
        receipt = (await new.sequential([("1", "c", {"text": "a"})])).receipts[0]
    finally:
        await old.engine.aclose()
        await new.engine.aclose()

    assert receipt.cache_hit is False
    assert engine_tools.STATE.calls["c"] == 2
    assert len(store.entries) == 2


async def test_failures_are_never_cached(make_harness: Any) -> None:
    schema = {"type": "object", "required": ["ok"]}
    harness = make_harness({"b": tool("bad_output", output_schema=schema, **CACHED)})

    for _ in range(2):
        await harness.sequential([("1", "b", {})])
        await harness.engine.drain()

    assert engine_tools.STATE.calls["bad_output"] == 2
    assert harness.cache.entries == {}


async def test_non_cacheable_tools_are_not_cached(make_harness: Any) -> None:
    harness = make_harness({"c": tool("cached_value", effect="read")})

    await harness.sequential([("1", "c", {"text": "a"})])
    await harness.engine.drain()

    assert harness.cache.entries == {}


async def test_an_output_that_redaction_would_change_is_not_cached(make_harness: Any) -> None:
    harness = make_harness({"s": tool("secret", redact=["token"], **CACHED)})

    for _ in range(2):
        receipt = (await harness.sequential([("1", "s", {"note": "n"})])).receipts[0]
        await harness.engine.drain()

    assert receipt.cache_hit is False
    assert receipt.output["token"] == "tok-123"
    assert harness.cache.entries == {}
    assert engine_tools.STATE.calls["s"] == 2
