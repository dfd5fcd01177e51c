"""The HTTP section's readings beside each round: our server's commits, and
PostgreSQL's checkpoints and backends."""

from __future__ import annotations

import psycopg
import pytest
from prometheus_client import generate_latest
from sqlalchemy.engine import make_url

from app.observability.metrics import REGISTRY
from app.observability.receipts import record_receipt_commit
from bench.http import _BACKEND_CPU, SLOW_COMMITS, _database_counters, writer_commits
from tests.support.waiting import wait_for_sync


@pytest.mark.postgres
def test_the_counters_count_a_checkpoint_and_the_buffers_it_wrote(postgres_url: str) -> None:
    read, close = _database_counters(postgres_url)
    dsn = make_url(postgres_url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("CREATE TABLE dirty (n integer)")
            connection.execute("INSERT INTO dirty SELECT generate_series(1, 1000)")
            before = read()
            connection.execute("CHECKPOINT")
        # The checkpointer reports its statistics just after the checkpoint ends.
        after = wait_for_sync(
            lambda: (now := read())["checkpoints"] > before["checkpoints"] and now,
            "the checkpoint is counted",
        )
    finally:
        close()
    assert after["checkpoints"] >= before["checkpoints"] + 1
    assert after["checkpoint buffers"] > before["checkpoint buffers"]


@pytest.mark.postgres
def test_the_counters_read_the_cpu_of_the_database_s_backends(postgres_url: str) -> None:
    read, close = _database_counters(postgres_url)
    dsn = make_url(postgres_url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with psycopg.connect(dsn, autocommit=True) as connection:
            (pid,) = connection.execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[misc]
            before = read()
            connection.execute("SELECT count(*) FROM generate_series(1, 3000000)")
            after = read()
    finally:
        close()
    key = f"{_BACKEND_CPU}{pid}"
    assert set(after) == {"checkpoints", "checkpoint buffers", key}
    assert after[key] - before[key] > 1e6  # a busy query's CPU: over a millisecond


def test_the_server_s_commits_are_read_off_its_own_histogram() -> None:
    before = writer_commits(generate_latest(REGISTRY).decode())
    for seconds in (0.001, 0.025, 0.0251, 0.3):
        record_receipt_commit(1, seconds, ok=True)
    after = writer_commits(generate_latest(REGISTRY).decode())
    assert after["commits"] - before["commits"] == 4
    assert after[SLOW_COMMITS] - before[SLOW_COMMITS] == 2


def test_a_page_without_the_histogram_is_refused() -> None:
    with pytest.raises(RuntimeError, match="toolloop_receipt_write_seconds"):
        writer_commits("# no metrics here\n")
