"""When a request may be sent again, and after how long.

Safe to repeat: an answer of 503 or 429 (the service says when, in Retry-After), and a
connection that failed before the request went out. Everything else is the caller's to
decide; a plan is never sent twice under two keys."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

RETRYABLE_STATUSES = frozenset({429, 503})
# httpx raises these before a byte of the request reached the service.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    backoff_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempts count from 1)."""
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.max_delay_s)
            except ValueError:
                pass  # an HTTP date: fall back to the backoff
        doublings = min(attempt - 1, 32)  # past that, max_delay_s has long been reached
        return float(min(self.backoff_s * 2**doublings, self.max_delay_s))

    def allows(self, attempt: int) -> bool:
        return attempt < self.max_attempts


NO_RETRY = RetryPolicy(max_attempts=1)
