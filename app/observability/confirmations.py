"""Confirmation metrics: how many calls waited for a person, and how each ended."""

from __future__ import annotations

from app.observability.labels import Vocabulary
from app.observability.metrics import CONFIRMATIONS

CONFIRMATION_EVENTS = Vocabulary(("requested", "approved", "rejected", "expired", "refused"))


def record_confirmation(event: str, count: int = 1) -> None:
    CONFIRMATIONS.labels(CONFIRMATION_EVENTS(event)).inc(count)
