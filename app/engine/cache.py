"""The result cache: successful outputs of cacheable tools, reused for identical calls.

Keyed by the call's fingerprint and the tool's definition hash, so a changed
tool never serves an old result. Failures are never cached. An output that
redaction would change is not cached either: the cache is a stored copy, and
serving a redacted copy on a hit would silently differ from a real run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from app.contract.compiled import Tool
from app.engine.ports import CachedOutput, CacheStore
from app.engine.receipt import Receipt


class ResultCache:
    def __init__(self, store: CacheStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    async def lookup(self, tool: Tool, fingerprint: str) -> CachedOutput | None:
        entry = await self._store.get(fingerprint, tool.definition_hash)
        if entry is None:
            return None
        if entry.expires_at is not None and self._clock() >= entry.expires_at:
            return None
        return entry

    def entry_for(self, tool: Tool, receipt: Receipt) -> CachedOutput | None:
        """What to keep for a succeeded receipt, or None when it must not be kept."""
        output = receipt.output
        if receipt.redactor.redact(output) is not output:
            return None
        created = receipt.finished_at
        ttl = tool.cache_ttl_s
        return CachedOutput(
            fingerprint=receipt.fingerprint,
            definition_hash=tool.definition_hash,
            tool=tool.id,
            output=output,
            source_receipt_id=receipt.receipt_id,
            created_at=created,
            expires_at=None if ttl is None else created + timedelta(seconds=ttl),
        )
