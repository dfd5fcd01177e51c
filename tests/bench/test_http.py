"""The HTTP section's reading of PostgreSQL's checkpoints beside each round."""

from __future__ import annotations

import time

import psycopg
import pytest
from sqlalchemy.engine import make_url

from bench.http import _BACKEND_CPU, _database_counters

pytestmark = pytest.mark.postgres


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
        for _ in range(200):  # a bound on the wait, not a timing assertion
            after = read()
            if after["checkpoints"] > before["checkpoints"]:
                break
            time.sleep(0.05)
    finally:
        close()
    assert after["checkpoints"] >= before["checkpoints"] + 1
    assert after["checkpoint buffers"] > before["checkpoint buffers"]


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
