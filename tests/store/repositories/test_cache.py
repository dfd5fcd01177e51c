from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.store.repositories import CacheRepository
from tests.store.factories import T0

FINGERPRINT = "sha256:" + "f" * 64
DEFINITION = "sha256:" + "d" * 64


async def test_put_then_get_until_expiry(session: AsyncSession) -> None:
    cache = CacheRepository(session)
    await cache.put(
        fingerprint=FINGERPRINT,
        definition_hash=DEFINITION,
        tool="transform",
        output={"value": 1},
        source_receipt_id="r-1",
        expires_at=T0 + timedelta(minutes=5),
        created_at=T0,
    )
    await session.commit()

    entry = await cache.get(FINGERPRINT, DEFINITION, T0 + timedelta(minutes=4))
    assert entry is not None
    assert (entry.tool, entry.output, entry.source_receipt_id) == ("transform", {"value": 1}, "r-1")
    assert await cache.get(FINGERPRINT, DEFINITION, T0 + timedelta(minutes=5)) is None
    assert await cache.get(FINGERPRINT, "sha256:other", T0) is None


async def test_put_replaces_the_entry_for_the_same_key(session: AsyncSession) -> None:
    cache = CacheRepository(session)
    for number in range(2):
        await cache.put(
            fingerprint=FINGERPRINT,
            definition_hash=DEFINITION,
            tool="transform",
            output={"value": number},
            source_receipt_id=f"r-{number}",
            expires_at=None,
        )
    await session.commit()

    entry = await cache.get(FINGERPRINT, DEFINITION, T0 + timedelta(days=3650))

    assert entry is not None
    assert (entry.output, entry.source_receipt_id, entry.expires_at) == ({"value": 1}, "r-1", None)


async def test_a_null_output_is_a_cached_value(session: AsyncSession) -> None:
    cache = CacheRepository(session)
    await cache.put(
        fingerprint=FINGERPRINT,
        definition_hash=DEFINITION,
        tool="transform",
        output=None,
        source_receipt_id=None,
        expires_at=None,
    )

    entry = await cache.get(FINGERPRINT, DEFINITION, T0)

    assert entry is not None
    assert entry.output is None


async def test_delete_expired_keeps_live_and_unbounded_entries(session: AsyncSession) -> None:
    cache = CacheRepository(session)
    for name, expires_at in [
        ("expired", T0 - timedelta(seconds=1)),
        ("expiring-now", T0),
        ("live", T0 + timedelta(seconds=1)),
        ("forever", None),
    ]:
        await cache.put(
            fingerprint=name,
            definition_hash=DEFINITION,
            tool="transform",
            output=name,
            source_receipt_id=None,
            expires_at=expires_at,
        )

    assert await cache.delete_expired(T0) == 2
    assert await cache.get("live", DEFINITION, T0) is not None
    assert await cache.get("forever", DEFINITION, T0) is not None
