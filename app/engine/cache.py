"""The result cache: successful outputs of cacheable tools, reused for identical calls.

Keyed by the call's fingerprint and the tool's definition hash, so a changed
tool never serves an old result. Failures are never cached. An output that
redaction would change is not cached either: the cache is a stored copy, and
serving a redacted copy on a hit would silently differ from a real run. Nor is
an output whose JSON is larger than `max_output_bytes`: stored receipts keep
only a truncated copy of such an output, and the cache must not keep more.

The store is the shared copy; the most recently used entries are also kept in
process, each only once its source receipt is durable, so a hit usually costs
no query. A kept entry is served until it expires, as the stored one would
be; another process replaces a stored entry only after it expired or after
both missed at once, and either output is a valid answer for the key.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta

from app.contract.compiled import Tool
from app.engine.json_output import json_size
from app.engine.ports import CachedOutput, CacheStore
from app.engine.receipt import Receipt


class ResultCache:
    def __init__(
        self,
        store: CacheStore,
        clock: Callable[[], datetime],
        *,
        kept: int = 10_000,
        max_output_bytes: int | None = None,
    ) -> None:
        self._store = store
        self._max_output_bytes = max_output_bytes
        self._clock = clock
        self._kept: OrderedDict[tuple[str, str], CachedOutput] = OrderedDict()
        self._keep_at_most = kept

    async def lookup(self, tool: Tool, fingerprint: str) -> CachedOutput | None:
        key = (fingerprint, tool.definition_hash)
        entry = self._kept.get(key)
        if entry is not None and not self._expired(entry):
            self._kept.move_to_end(key)
            return entry
        entry = await self._store.get(fingerprint, tool.definition_hash)
        if entry is None or self._expired(entry):
            self._kept.pop(key, None)
            return None
        self._keep(key, entry)
        return entry

    def _expired(self, entry: CachedOutput) -> bool:
        return entry.expires_at is not None and self._clock() >= entry.expires_at

    def remember_when_durable(self, entry: CachedOutput, durable: asyncio.Future[None]) -> None:
        """Keep `entry` in process once the transaction holding its source receipt commits."""

        def committed(future: asyncio.Future[None]) -> None:
            if not future.cancelled() and future.exception() is None:
                self._keep((entry.fingerprint, entry.definition_hash), entry)

        if durable.done():
            committed(durable)
        else:
            durable.add_done_callback(committed)

    def _keep(self, key: tuple[str, str], entry: CachedOutput) -> None:
        self._kept[key] = entry
        self._kept.move_to_end(key)
        if len(self._kept) > self._keep_at_most:
            self._kept.popitem(last=False)

    def entry_for(self, tool: Tool, receipt: Receipt) -> CachedOutput | None:
        """What to keep for a succeeded receipt, or None when it must not be kept."""
        output = receipt.output
        if receipt.redactor.redact(output) is not output:
            return None
        limit = self._max_output_bytes
        if limit is not None and json_size(output) > limit:
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
