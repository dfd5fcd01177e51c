"""Cache entries kept in process: only once durable, until they expire, bounded."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from app.engine.cache import ResultCache
from app.engine.memory import MemoryCacheStore
from app.engine.ports import CachedOutput

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class CountingStore(MemoryCacheStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, fingerprint: str, definition_hash: str) -> CachedOutput | None:
        self.gets += 1
        return await super().get(fingerprint, definition_hash)


def _entry(fingerprint: str, *, expires_at: datetime | None = None) -> CachedOutput:
    return CachedOutput(fingerprint, "sha256:def", "t", {"n": 1}, "r1", NOW, expires_at)


class _Tool:
    id = "t"
    definition_hash = "sha256:def"


async def test_an_entry_is_kept_once_its_receipt_is_durable_and_then_needs_no_query() -> None:
    store = CountingStore()
    cache = ResultCache(store, lambda: NOW)
    durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    cache.remember_when_durable(_entry("f1"), durable)
    subject: Any = _Tool()

    assert await cache.lookup(subject, "f1") is None  # not durable yet: the store is asked
    assert store.gets == 1
    durable.set_result(None)
    await asyncio.sleep(0)
    hit = await cache.lookup(subject, "f1")
    assert hit is not None
    assert hit.source_receipt_id == "r1"
    assert store.gets == 1


async def test_an_entry_whose_receipt_failed_to_commit_is_not_kept() -> None:
    store = CountingStore()
    cache = ResultCache(store, lambda: NOW)
    durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    cache.remember_when_durable(_entry("f1"), durable)
    durable.set_exception(RuntimeError("commit failed"))
    await asyncio.sleep(0)
    assert await cache.lookup(_Tool(), "f1") is None  # type: ignore[arg-type]
    durable.exception()


async def test_a_kept_entry_expires_and_the_store_is_asked_again() -> None:
    now = [NOW]
    store = CountingStore()
    cache = ResultCache(store, lambda: now[0])
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    cache.remember_when_durable(_entry("f1", expires_at=NOW + timedelta(seconds=5)), done)
    await asyncio.sleep(0)
    assert await cache.lookup(_Tool(), "f1") is not None  # type: ignore[arg-type]
    assert store.gets == 0
    now[0] = NOW + timedelta(seconds=6)
    assert await cache.lookup(_Tool(), "f1") is None  # type: ignore[arg-type]
    assert store.gets == 1


async def test_at_most_the_bound_is_kept_least_recently_used_first_out() -> None:
    store = CountingStore()
    cache = ResultCache(store, lambda: NOW, kept=2)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    for name in ("a", "b", "c"):
        cache.remember_when_durable(_entry(name), done)
    await asyncio.sleep(0)
    subject: Any = _Tool()
    assert await cache.lookup(subject, "a") is None  # evicted, and not in the store
    assert store.gets == 1
    assert await cache.lookup(subject, "c") is not None
    assert store.gets == 1
