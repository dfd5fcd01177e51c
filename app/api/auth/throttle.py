"""Failed-authentication throttle: a token bucket per client address.

Only failures spend tokens, so a valid key is never throttled and a guesser
cannot lock out the legitimate clients behind the same address. Once an
address's bucket is empty, its further bad or missing keys get 429 with
Retry-After until a token refills. Buckets live in memory, per process; the
least recently failing addresses are forgotten beyond `max_addresses`.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class FailedAuthThrottle:
    def __init__(
        self,
        *,
        burst: int = 10,
        per_minute: float = 10.0,
        max_addresses: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or per_minute <= 0 or max_addresses < 1:
            raise ValueError("burst and max_addresses must be at least 1, per_minute positive")
        self._burst = float(burst)
        self._per_second = per_minute / 60.0
        self._max_addresses = max_addresses
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def blocked_for(self, address: str) -> int | None:
        """Seconds until `address` may fail again (the Retry-After), or None if it may now."""
        bucket = self._buckets.get(address)
        return None if bucket is None else self._wait(self._refilled(bucket))

    def record_failure(self, address: str) -> int | None:
        """Spend a token for a failed attempt; the Retry-After if none was left."""
        bucket = self._buckets.get(address)
        if bucket is None:
            bucket = self._buckets[address] = _Bucket(self._burst, self._clock())
            while len(self._buckets) > self._max_addresses:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(address)
        wait = self._wait(self._refilled(bucket))
        if wait is None:
            bucket.tokens -= 1.0
        return wait

    def _refilled(self, bucket: _Bucket) -> _Bucket:
        now = self._clock()
        elapsed = max(0.0, now - bucket.updated)
        bucket.tokens = min(self._burst, bucket.tokens + elapsed * self._per_second)
        bucket.updated = now
        return bucket

    def _wait(self, bucket: _Bucket) -> int | None:
        if bucket.tokens >= 1.0:
            return None
        return max(1, math.ceil((1.0 - bucket.tokens) / self._per_second))
