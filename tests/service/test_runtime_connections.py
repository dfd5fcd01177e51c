"""The connections a process holds on PostgreSQL beyond its pools, counted by the
server (`pg_stat_activity`, by the process's `application_name`) once it has
sent a notice: one for the notices (every channel listened on and every
notice sent) and, when a tool has limits, the session that holds its slots."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.service.runtime import Runtime
from app.settings import Settings
from app.store.database import postgres_conninfo
from tests.support.app import running
from tests.support.waiting import BOUND_S, wait_for_sync

pytestmark = pytest.mark.postgres

REGISTRY = """\
subagents:
  limits:
    tools:
      unused:
        callable: tests.service.shared_limits_tools:paced
        description: A tool the process never calls.
        input_schema:
          type: object
          properties: {{label: {{type: string}}}}
          required: [label]
          additionalProperties: false
        output_schema: {{type: object}}
        effect: read
{limit}
    runner_defaults:
      allowed_tools: [unused]
      max_calls: 10
      tool_timeout_s: 10
"""


def _connections(conninfo: str, application_name: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _pooled(engine: AsyncEngine) -> int:
    pool = engine.sync_engine.pool
    return int(pool.checkedin() + pool.checkedout())  # type: ignore[attr-defined]


def _pools(runtime: Runtime) -> int:
    engines = {id(e): e for e in (runtime.database, runtime.writer_database)}
    return sum(_pooled(engine) for engine in engines.values())


@pytest.mark.parametrize(
    ("limit", "beyond_pools"),
    [("        max_concurrency: 2", 2), ("", 1)],
    ids=["with-limits", "without-limits"],
)
async def test_a_process_holds_one_notices_connection_and_one_slots_session(
    postgres_url: str, tmp_path: Path, limit: str, beyond_pools: int
) -> None:
    name = f"toolloop_count_{uuid.uuid4().hex[:12]}"
    url = make_url(postgres_url).update_query_dict({"application_name": name})
    url_text = url.render_as_string(hide_password=False)
    registry = tmp_path / "limits.yml"
    registry.write_text(REGISTRY.format(limit=limit))
    admin = postgres_conninfo(postgres_url)
    assert admin is not None
    settings = Settings(registries=[registry], database_url=url_text, postgres_writer_process=False)
    assert _connections(admin, name) == 0

    async with (
        await psycopg.AsyncConnection.connect(admin, autocommit=True) as heard,
        running(settings) as (app, _client),
    ):
        runtime: Runtime = app.state.runtime
        await heard.execute(f"LISTEN {name}")
        assert runtime.notices is not None
        runtime.notices.send(name, "sent")
        async for _notice in heard.notifies(timeout=BOUND_S, stop_after=1):
            break
        else:
            pytest.fail("the process's notice was not sent")
        # Read without yielding to the loop, so that no task opens a connection between.
        held, pooled = _connections(admin, name), _pools(runtime)
        assert held - pooled == beyond_pools

    wait_for_sync(lambda: _connections(admin, name) == 0, "every connection closed")
