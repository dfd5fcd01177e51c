"""Tools for the replicas' limits tests. Each records what it does in the shared
PostgreSQL database (`PROBE_DSN_ENV`): the callers are other processes.

`occupy` counts the calls running at once across every replica, and the peak;
`paced` records when each call started, on the database server's clock.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg

PROBE_DSN_ENV = "TOOLLOOP_TEST_PROBE_DSN"

PROBE_TABLES = (
    "CREATE TABLE probe_occupancy (id int PRIMARY KEY, running int NOT NULL, peak int NOT NULL)",
    "INSERT INTO probe_occupancy VALUES (1, 0, 0)",
    "CREATE TABLE probe_starts (tool text NOT NULL, at float8 NOT NULL)",
)


def _probe() -> psycopg.Connection[Any]:
    return psycopg.connect(os.environ[PROBE_DSN_ENV], autocommit=True)


def occupy(hold_s: float) -> dict[str, Any]:
    """Count this call as running for `hold_s` seconds."""
    with _probe() as conn:
        conn.execute(
            "UPDATE probe_occupancy SET running = running + 1,"
            " peak = GREATEST(peak, running + 1) WHERE id = 1"
        )
        try:
            time.sleep(hold_s)
        finally:
            conn.execute("UPDATE probe_occupancy SET running = running - 1 WHERE id = 1")
    return {"held_s": hold_s}


def paced(label: str) -> dict[str, Any]:
    """Record this call's start."""
    with _probe() as conn:
        conn.execute(
            "INSERT INTO probe_starts VALUES (%s, extract(epoch FROM clock_timestamp()))",
            ("paced",),
        )
    return {"label": label}
