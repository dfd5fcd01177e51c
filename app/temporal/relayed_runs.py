"""A worker relays the receipts of the runs on Temporal that a serve process follows.

A stream of a run recorded `ORCHESTRATED` asks for it on the orchestrated runs'
channel (`RunReplicas.follow`), which every worker listens on. Each worker
answers and, for `ORCHESTRATED_WATCH_LEASE_S`, sends the `seq` numbers of that
run's receipts as its journal commits them (`RunEventRelay`), as a replica
relays its own runs; the follower renews the watch while it follows. The worker
that records the run's end relays the end (`Runtime.relay_run_end`). Runs nobody follows
cost nothing more than a worker's receipts already do.
"""

from __future__ import annotations

import logging

import orjson

from app.service.runs.relay import ORCHESTRATED_WATCH_LEASE_S, NoticeSender, RunEventRelay, notice
from app.service.runs.replicas import instance_channel
from app.store.notices import PostgresNotices
from app.store.repositories.runs import ORCHESTRATED

logger = logging.getLogger("toolloop.temporal.relay")

ORCHESTRATED_CHANNEL = instance_channel(ORCHESTRATED)


class OrchestratedWatches:
    """The listener's callback on `ORCHESTRATED_CHANNEL`: each watch relays its run."""

    def __init__(self, relay: RunEventRelay, notices: NoticeSender) -> None:
        self._relay = relay
        self._notices = notices

    def receive(self, channel: str, payload: str) -> None:
        message = orjson.loads(payload)
        if message.get("op") != "watch":
            logger.warning("an unknown notice on %s: %s", channel, message.get("op"))
            return
        self._relay.watch(message["run"], ORCHESTRATED_WATCH_LEASE_S)
        if "ref" in message:  # a first watch waits for an answer; a renewal does not
            answer = {"op": "answer", "ref": message["ref"], "watching": True}
            self._notices.send(instance_channel(message["from"]), notice(answer))


async def listen_for_watches(notices: PostgresNotices, relay: RunEventRelay) -> None:
    """Listen on `ORCHESTRATED_CHANNEL` on the process's one notices connection (answers
    go out on it too). Raises psycopg.Error when PostgreSQL cannot be reached."""
    watches = OrchestratedWatches(relay, notices)
    await notices.listen(
        (ORCHESTRATED_CHANNEL,), lambda notify: watches.receive(notify.channel, notify.payload)
    )
