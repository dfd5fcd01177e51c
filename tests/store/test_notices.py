"""LISTEN/NOTIFY on a real PostgreSQL database: what one process sends, another hears."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.store.database import postgres_conninfo
from app.store.notices import MAX_PAYLOAD_BYTES, PostgresNotices
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


async def test_notices_reach_the_listeners_of_their_channel_in_order(postgres_url: str) -> None:
    conninfo = postgres_conninfo(postgres_url)
    assert conninfo is not None
    heard: list[tuple[str, str]] = []
    other: list[tuple[str, str]] = []
    listener = PostgresNotices(conninfo, ["toolloop_a", "toolloop_all"])
    bystander = PostgresNotices(conninfo, ["toolloop_b"])
    sender = PostgresNotices(conninfo, [])
    await listener.start(lambda channel, payload: heard.append((channel, payload)))
    await bystander.start(lambda channel, payload: other.append((channel, payload)))
    await sender.start(lambda channel, payload: None)
    try:
        sent = [("toolloop_a", str(n)) for n in range(150)] + [("toolloop_all", "last")]
        for channel, payload in sent:
            sender.send(channel, payload)
        await wait_for(lambda: len(heard) == len(sent), "every notice was heard")
    finally:
        for notices in (sender, bystander, listener):
            await notices.aclose()

    assert heard == sent
    assert other == []


def test_a_payload_past_postgresqls_limit_is_refused_before_it_is_queued() -> None:
    notices = PostgresNotices("host=127.0.0.1", [])
    with pytest.raises(ValueError, match="limited"):
        notices.send("toolloop_a", "x" * (MAX_PAYLOAD_BYTES + 1))


async def test_a_lost_connection_is_opened_again_listening_and_sending(postgres_url: str) -> None:
    name = f"toolloop_notices_{uuid.uuid4().hex[:12]}"
    conninfo = postgres_conninfo(
        make_url(postgres_url).update_query_dict({"application_name": name})
    )
    admin = postgres_conninfo(postgres_url)
    assert conninfo is not None
    assert admin is not None
    heard: list[str] = []
    reopened: list[bool] = []
    notices = PostgresNotices(conninfo)
    await notices.listen(
        ["toolloop_a"], lambda notice: heard.append(notice.payload), lambda: reopened.append(True)
    )
    try:
        notices.send("toolloop_a", "before")
        await wait_for(lambda: heard == ["before"], "the notice before the loss was heard")
        with psycopg.connect(admin, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (name,),
            ).fetchall()
        assert ended == [(True,)]  # the process's one connection
        await wait_for(lambda: reopened == [True], "the connection was opened again")
        notices.send("toolloop_a", "after")
        await wait_for(lambda: heard == ["before", "after"], "the notice after the loss was heard")
    finally:
        await notices.aclose()
