"""Metrics of the group-commit receipt writer."""

from __future__ import annotations

from app.observability.metrics import (
    POSTGRES_WRITER_STARTS,
    RECEIPT_BATCH,
    RECEIPT_WAL_WAIT,
    RECEIPT_WRITE,
    RECEIPT_WRITE_FAILURES,
    SQLITE_WRITER_STARTS,
)


def record_receipt_commit(receipts: int, seconds: float, *, ok: bool) -> None:
    RECEIPT_WRITE.observe(seconds)
    if receipts:
        RECEIPT_BATCH.observe(receipts)
    if not ok:
        RECEIPT_WRITE_FAILURES.inc()


def record_wal_wait(seconds: float) -> None:
    RECEIPT_WAL_WAIT.observe(seconds)


def record_writer_process_starts(count: int, *, postgres: bool = False) -> None:
    (POSTGRES_WRITER_STARTS if postgres else SQLITE_WRITER_STARTS).inc(count)
