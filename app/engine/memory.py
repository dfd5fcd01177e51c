"""In-process implementations of the engine's ports: for tests and a database-free mode.

Nothing here survives the process: "durable" means "held in this object".
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.engine.ports import AuditEvent, CachedOutput
from app.engine.receipt import Receipt


class MemoryReceiptSink:
    def __init__(self, cache: MemoryCacheStore | None = None) -> None:
        self.receipts: list[Receipt] = []
        self._cache = cache

    def submit(
        self, receipt: Receipt, cache_entry: CachedOutput | None = None
    ) -> asyncio.Future[None]:
        self.receipts.append(receipt)
        if cache_entry is not None and self._cache is not None:
            self._cache.entries[(cache_entry.fingerprint, cache_entry.definition_hash)] = (
                cache_entry
            )
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def stored(self, run_id: str) -> list[dict[str, Any]]:
        """The stored (redacted) copies of one run's receipts, in sequence order."""
        found = [receipt for receipt in self.receipts if receipt.run_id == run_id]
        return [receipt.to_stored() for receipt in sorted(found, key=lambda r: r.seq)]


class MemoryAuditSink:
    def __init__(self) -> None:
        self.events: list[AuditEvent] = []

    def emit(self, event: AuditEvent) -> None:
        self.events.append(event)


class MemoryCacheStore:
    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], CachedOutput] = {}

    async def get(self, fingerprint: str, definition_hash: str) -> CachedOutput | None:
        return self.entries.get((fingerprint, definition_hash))
