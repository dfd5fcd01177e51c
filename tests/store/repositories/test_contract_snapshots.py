from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.store.repositories import ContractSnapshotRepository

HASH = "sha256:" + "a" * 64


async def test_save_if_absent_stores_once(session: AsyncSession) -> None:
    snapshots = ContractSnapshotRepository(session)

    assert await snapshots.save_if_absent(HASH, {"tools": {"b": 1, "a": 2}}, 2) is True
    assert await snapshots.save_if_absent(HASH, {"tools": {}}, 0) is False
    await session.commit()
    session.expunge_all()

    stored = await snapshots.get(HASH)
    assert stored is not None
    assert stored.canonical == {"tools": {"b": 1, "a": 2}}
    assert list(stored.canonical["tools"]) == ["b", "a"]
    assert stored.tool_count == 2
    assert await snapshots.get("sha256:unknown") is None
