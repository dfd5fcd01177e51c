"""The journal's side of the hash chain: the heads of chains, read in the
transaction that extends them, and the checkpoints it appends.

On PostgreSQL a chain's head and the latest checkpoint are read under a
transaction-scoped advisory lock, so that two processes extending the same
chain (a day's run-less audit rows) or appending checkpoints take turns; the
lock ends with the transaction. SQLite has one writer at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, time, timedelta

from sqlalchemy import insert, select, text

from app.foundation.chain import (
    CHECKPOINT_GENESIS,
    DAY_CHAIN_PREFIX,
    RunHead,
    checkpoint_link,
    checkpoint_payload,
    genesis,
)
from app.foundation.signing import CheckpointSigner
from app.store.models import AuditEvent, ChainCheckpoint, Receipt
from app.store.repositories.base import Repository

# The advisory lock of the checkpoints' sequence (a chain's is derived from its id).
_CHECKPOINTS_LOCK = "toolloop-checkpoints"


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class ChainHeadRepository(Repository):
    async def _lock(self, name: str) -> None:
        if self.session.get_bind().dialect.name == "postgresql":
            await self.session.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(name)}
            )

    async def heads(
        self, chain_ids: Iterable[str], *, lock: bool = True
    ) -> dict[str, tuple[int, str]]:
        """Each chain's (length, last link), (0, genesis) for one with no entry yet;
        in sorted order, each under its lock with `lock`."""
        found: dict[str, tuple[int, str]] = {}
        for chain_id in sorted(chain_ids):
            if lock:
                await self._lock(chain_id)
            found[chain_id] = await self._head(chain_id)
        return found

    async def _head(self, chain_id: str) -> tuple[int, str]:
        best: tuple[int, str] = (0, genesis(chain_id))
        for model in (Receipt, AuditEvent):
            statement = select(model.chain_seq, model.chain_link)
            if chain_id.startswith(DAY_CHAIN_PREFIX):
                if model is Receipt:
                    continue
                day = datetime.combine(
                    datetime.fromisoformat(chain_id.removeprefix(DAY_CHAIN_PREFIX)).date(),
                    time(),
                    UTC,
                )
                statement = statement.where(
                    AuditEvent.run_id.is_(None),
                    AuditEvent.at >= day,
                    AuditEvent.at < day + timedelta(days=1),
                )
            else:
                statement = statement.where(model.run_id == chain_id)
            statement = statement.where(model.chain_seq.is_not(None))
            row = (
                await self.session.execute(statement.order_by(model.chain_seq.desc()).limit(1))
            ).first()
            if row is not None and row[0] is not None and row[0] > best[0]:
                best = (row[0], str(row[1]))
        return best

    async def add_checkpoint(self, runs: list[RunHead], signer: CheckpointSigner | None) -> int:
        """Append a checkpoint of `runs`' heads after the latest one: its seq."""
        await self._lock(_CHECKPOINTS_LOCK)
        latest = (
            await self.session.execute(
                select(ChainCheckpoint.seq, ChainCheckpoint.link)
                .order_by(ChainCheckpoint.seq.desc())
                .limit(1)
            )
        ).first()
        seq, prev = (1, CHECKPOINT_GENESIS) if latest is None else (latest[0] + 1, latest[1])
        created_at = datetime.now(UTC)
        ordered = sorted(runs, key=lambda run: run.run_id)
        linked = checkpoint_link(prev, checkpoint_payload(seq, created_at, ordered))
        await self.session.execute(
            insert(ChainCheckpoint).values(
                seq=seq,
                created_at=created_at,
                runs=[{"run_id": r.run_id, "length": r.length, "head": r.head} for r in ordered],
                prev=prev,
                link=linked,
                signature=None if signer is None else signer.sign(linked),
                key_id=None if signer is None else signer.key_id,
            )
        )
        return int(seq)
