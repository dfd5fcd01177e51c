"""Idempotency keys through the group commit: claimed with their runs, answered with
their ends, freed after a 503."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.database import create_session_factory
from app.store.repositories.idempotency import COMPLETED, IN_PROGRESS, IdempotencyRepository
from app.store.repositories.receipts import ReceiptRepository
from app.store.repositories.runs import RunRepository
from tests.writer_support import (
    running_writer,
    started_run,
    succeeded_receipt,
)


def run_row(run_id: str) -> dict[str, Any]:
    return started_run(run_id, caller="alice")


def key_row(key: str, run_id: str, *, expires_in_s: float = 3600.0) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "caller": "alice",
        "key": key,
        "request_digest": "d" * 64,
        "state": IN_PROGRESS,
        "response_status": None,
        "response_body": None,
        "run_id": run_id,
        "created_at": now,
        "expires_at": now + timedelta(seconds=expires_in_s),
    }


async def stored(run_engine: AsyncEngine, key: str, *run_ids: str) -> tuple[Any, list[str]]:
    """The key's row, and which of `run_ids` are stored."""
    async with create_session_factory(run_engine)() as session:
        row = await IdempotencyRepository(session).get("alice", key)
        runs = RunRepository(session)
        return row, [run_id for run_id in run_ids if await runs.get(run_id) is not None]


async def test_a_new_key_is_claimed_with_its_run(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        assert await writer.claim_run(key_row("k", "run-2"), run_row("run-2")) is True
    row, runs = await stored(run_engine, "k", "run-2")
    assert (row.state, row.run_id) == (IN_PROGRESS, "run-2")
    assert runs == ["run-2"]


async def test_a_run_claimed_and_ended_in_one_transaction_is_inserted_ended(
    run_engine: AsyncEngine,
    through: dict[str, Any],
) -> None:
    now = datetime.now(UTC)

    def end(run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "status": "succeeded", "call_count": 1, "finished_at": now}

    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        claimed = writer.claim_run(key_row("k", "run-2"), run_row("run-2"))
        await asyncio.gather(claimed, writer.end_run(end("run-2")))
        # The key is held now: neither the run nor its end is written.
        held = writer.claim_run(key_row("k", "run-3"), run_row("run-3"))
        await asyncio.gather(held, writer.end_run(end("run-3")))
    assert (claimed.result(), held.result()) == (True, False)
    row, runs = await stored(run_engine, "k", "run-2", "run-3")
    assert (row.state, row.run_id) == (IN_PROGRESS, "run-2")
    assert runs == ["run-2"]
    async with create_session_factory(run_engine)() as session:
        ended = await RunRepository(session).get("run-2")
    assert ended is not None
    assert (ended.status, ended.call_count, ended.finished_at) == ("succeeded", 1, now)


async def test_a_held_key_starts_no_run_and_fails_no_other_row(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        await writer.claim_run(key_row("k", "run-2"), run_row("run-2"))
        # One transaction: a claim that loses, a receipt and another run's start.
        lost = writer.claim_run(key_row("k", "run-3"), run_row("run-3"))
        receipt = writer.submit(succeeded_receipt(0, {"n": 0}))
        start = writer.start_run(run_row("run-4"))
        assert start is receipt
        assert await lost is False
        await receipt
    row, runs = await stored(run_engine, "k", "run-2", "run-3", "run-4")
    assert row.run_id == "run-2"
    assert runs == ["run-2", "run-4"]
    async with create_session_factory(run_engine)() as session:
        assert [r.seq for r in await ReceiptRepository(session).list_for_run("run-1")] == [0]


async def test_of_two_claims_of_one_key_in_one_transaction_the_first_wins(
    run_engine: AsyncEngine,
    through: dict[str, Any],
) -> None:
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        first = writer.claim_run(key_row("k", "run-2"), run_row("run-2"))
        second = writer.claim_run(key_row("k", "run-3"), run_row("run-3"))
        assert await asyncio.gather(first, second) == [True, False]
    row, runs = await stored(run_engine, "k", "run-2", "run-3")
    assert row.run_id == "run-2"
    assert runs == ["run-2"]
    assert writer.open_runs == {"run-2"}  # the loser's run is not left open


async def test_an_expired_key_is_claimed_again_in_place(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        await writer.claim_run(key_row("k", "run-2", expires_in_s=-1.0), run_row("run-2"))
        assert await writer.claim_run(key_row("k", "run-3"), run_row("run-3")) is True
    row, runs = await stored(run_engine, "k", "run-2", "run-3")
    assert row.run_id == "run-3"
    assert runs == ["run-2", "run-3"]


async def test_a_failed_transaction_fails_its_claims_and_leaves_their_runs_unstarted(
    run_engine: AsyncEngine,
    through: dict[str, Any],
) -> None:
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        await writer.submit(succeeded_receipt(0, {}))
        duplicate = writer.submit(succeeded_receipt(0, {}))
        claimed = writer.claim_run(key_row("k", "run-2"), run_row("run-2"))
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            await claimed
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            await duplicate
    row, runs = await stored(run_engine, "k", "run-2")
    assert (row, runs) == (None, [])
    assert "run-2" in writer.unstarted_runs
    assert "run-2" not in writer.open_runs


async def test_an_answer_commits_in_the_transaction_of_its_run_s_end(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    answer = {
        "caller": "alice",
        "key": "k",
        "state": COMPLETED,
        "response_status": 200,
        "response_body": {"headers": {}, "body": {"status": "succeeded"}},
        "run_id": None,
    }
    async with running_writer(run_engine, **through, linger_s=0.005) as writer:
        await writer.claim_run(key_row("k", "run-1-key"), run_row("run-1-key"))
        receipt = writer.submit(succeeded_receipt(0, {"n": 0}))
        end = writer.end_run_with(
            [receipt],
            {"run_id": "run-1", "status": "succeeded", "call_count": 1, "finished_at": _now()},
            answer,
        )
        assert end is receipt  # one transaction: receipt, end and answer
        await end
    row, _ = await stored(run_engine, "k")
    assert (row.state, row.response_status) == (COMPLETED, 200)
    assert row.response_body == {"headers": {}, "body": {"status": "succeeded"}}
    assert row.run_id == "run-1-key"  # kept


async def test_a_key_is_freed_once_its_late_claim_committed(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        claimed = writer.claim_run(key_row("k", "run-2"), run_row("run-2"))
        writer.release_once_claimed(claimed, "alice", "k", "run-2")
        # A key held by another run is not freed.
        other = writer.claim_run(key_row("other", "run-3"), run_row("run-3"))
        writer.release_once_claimed(other, "alice", "other", "run-2")
        await asyncio.gather(claimed, other)
        await writer.flush()
    freed, _ = await stored(run_engine, "k")
    kept, _ = await stored(run_engine, "other")
    assert freed is None
    assert kept is not None


async def test_a_lost_claim_is_not_freed_nor_its_run_ended(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        await writer.claim_run(key_row("k", "run-2"), run_row("run-2"))
        lost = writer.claim_run(key_row("k", "run-3"), run_row("run-3"))
        writer.release_once_claimed(lost, "alice", "k", "run-3")
        writer.end_once_started(lost, {**_end("run-3")})
        assert await lost is False
        await writer.flush()
    row, runs = await stored(run_engine, "k", "run-2", "run-3")
    assert row.run_id == "run-2"
    assert runs == ["run-2"]


async def test_a_closed_writer_refuses_a_claim(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        await writer.claim_run(key_row("k", "run-2"), run_row("run-2"))


def _now() -> datetime:
    return datetime.now(UTC)


def _end(run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "status": "failed", "call_count": 0, "finished_at": _now()}
