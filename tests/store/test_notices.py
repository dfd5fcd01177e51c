"""LISTEN/NOTIFY on a real PostgreSQL database: what one process sends, another hears."""

from __future__ import annotations

import pytest

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
