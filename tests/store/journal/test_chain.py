"""The hash chain the journal writes: recomputed from the rows read back (with
`app.foundation.chain` alone), on both databases, in this process and in the
writer process; checkpoints chained and signed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.engine.ports import AuditEvent, AuditKind
from app.foundation.chain import (
    AUDIT_EVENTS,
    RECEIPTS,
    Checkpoint,
    Entry,
    RunHead,
    day_chain_id,
    row_digest,
    verify_chain,
    verify_checkpoints,
)
from app.foundation.signing import load_signer, verify
from app.service.runs.records import run_end
from app.store.database import create_session_factory
from app.store.journal.chain import stored_entry
from app.store.journal.writer import GroupCommitWriter
from app.store.models import AuditEvent as AuditRow
from app.store.models import ChainCheckpoint, Receipt
from tests.writer_support import RUN_ID, running_writer, started_run, succeeded_receipt


def _columns(row: Any) -> dict[str, Any]:
    return {column.name: getattr(row, column.key) for column in type(row).__table__.columns}


async def stored_chain(engine: AsyncEngine, chain_id: str) -> tuple[list[Entry], list[Entry]]:
    """(the chain's entries, its superseded entries) from the rows as stored."""
    async with create_session_factory(engine)() as session:
        if chain_id.startswith("day:"):
            receipts: list[Any] = []
            audit = list(
                (await session.scalars(select(AuditRow).where(AuditRow.run_id.is_(None)))).all()
            )
            audit = [row for row in audit if day_chain_id(row.at) == chain_id]
        else:
            receipts = list(
                (await session.scalars(select(Receipt).where(Receipt.run_id == chain_id))).all()
            )
            audit = list(
                (await session.scalars(select(AuditRow).where(AuditRow.run_id == chain_id))).all()
            )
    entries = [
        Entry(row.chain_seq, row_digest(RECEIPTS, _columns(row)), row.chain_link)
        for row in receipts
    ]
    entries += [
        Entry(row.chain_seq, row_digest(AUDIT_EVENTS, _columns(row)), row.chain_link)
        for row in audit
    ]
    formers = [row.detail.get("chain") for row in audit if isinstance(row.detail, dict)]
    superseded = [Entry(f["seq"], f["digest"], f["link"]) for f in formers if f is not None]
    return entries, superseded


async def problems(engine: AsyncEngine, chain_id: str) -> list[str]:
    entries, superseded = await stored_chain(engine, chain_id)
    assert entries
    return verify_chain(chain_id, entries, superseded)


def varied_output(seq: int) -> Any:
    return {
        "n": seq,
        "ratio": seq / 3,
        "whole": 2.0,
        "flag": seq % 2 == 0,
        "nothing": None,
        "text": 'ünïcode \u2028 "quoted"',
        "nested": {"b": [1, {"z": 1, "a": 2}], "a": []},
    }


def _events(run_id: str, seq: int, now: datetime) -> list[AuditEvent]:
    identity = {"receipt_id": f"{run_id}-r{seq}", "seq": seq, "parent_receipt_id": None}
    started = AuditEvent(AuditKind.CALL_STARTED, now, run_id, None, "t", str(seq), None, identity)
    finished = AuditEvent(
        AuditKind.CALL_FINISHED,
        now,
        run_id,
        None,
        "t",
        str(seq),
        None,
        {**identity, "status": "succeeded", "attempts": 1, "duration_ms": 0.5, "error": None},
    )
    return [started, finished]


def _service_row(run_id: str | None, kind: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "at": datetime.now(UTC),
        "kind": kind,
        "caller": "ops",
        "tool": None,
        "call_key": None,
        "item_key": None,
        "detail": {"why": kind, "when": 1.5},
    }


async def test_every_row_s_link_recomputes_from_the_rows_read_back(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    now = datetime.now(UTC)
    async with running_writer(run_engine, **through) as writer:
        started = writer.start_run(started_run("run-2"))
        waits = [started]
        for seq in range(6):
            for run_id in ("run-2", RUN_ID):  # RUN_ID was stored before: its head is read
                receipt = succeeded_receipt(seq, varied_output(seq))._replace(
                    run_id=run_id, receipt_id=f"{run_id}-r{seq}"
                )
                for item in _events(run_id, seq, now):
                    writer.emit(item)
                waits.append(writer.submit(receipt))
        writer.emit_row(_service_row("run-2", "plan.note"))
        writer.emit_row(_service_row(None, "plan.rejected"))
        for future in waits:
            await future
        await writer.end_run(run_end("run-2", status="succeeded", call_count=6))
        writer.emit_row(_service_row("run-2", "after.end"))  # read again after the end
        writer.emit_row(_service_row(None, "plan.rejected"))
        await writer.flush()
    for chain_id in ("run-2", RUN_ID, day_chain_id(datetime.now(UTC))):
        assert await problems(run_engine, chain_id) == []
    run_2, _ = await stored_chain(run_engine, "run-2")
    assert sorted(entry.position for entry in run_2) == list(range(1, len(run_2) + 1))

    # Another writer (a restart, another process) continues RUN_ID from its stored head.
    before, _ = await stored_chain(run_engine, RUN_ID)
    async with running_writer(run_engine, **through) as writer:
        await writer.submit(succeeded_receipt(6, {"n": 6})._replace(receipt_id="again"))
    after, _ = await stored_chain(run_engine, RUN_ID)
    assert len(after) == len(before) + 1
    assert await problems(run_engine, RUN_ID) == []

    # A changed row is found.
    async with create_session_factory(run_engine).begin() as session:
        await session.execute(
            update(Receipt).where(Receipt.id == "run-2-r3").values(output={"n": 99})
        )
    found = await problems(run_engine, "run-2")
    assert len(found) == 1
    assert found[0].startswith("run-2: link mismatch at position")


async def test_a_replaced_receipt_stays_verifiable_from_its_replacement_s_audit_row(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    async with running_writer(run_engine, **through) as writer:
        for seq in range(3):
            await writer.submit(succeeded_receipt(seq, {"n": seq}))
    async with create_session_factory(run_engine)() as session:
        stored = await session.get(Receipt, "r1")
        assert stored is not None
        entry = stored_entry(stored)
    assert entry is not None
    superseded = {**_service_row(RUN_ID, "receipt.superseded")}
    superseded["detail"] = {"seq": 1, "receipt_id": "r1", "chain": entry}
    async with running_writer(run_engine, **through) as writer:
        writer.supersede(RUN_ID, {1: superseded})
        await writer.submit(succeeded_receipt(1, {"n": "again"}, receipt_id="r1b"))
    entries, former = await stored_chain(run_engine, RUN_ID)
    assert [entry.position for entry in former] == [2]
    assert {entry.position for entry in entries} == {1, 3, 4, 5}  # r1b, then its audit row
    assert verify_chain(RUN_ID, entries, former) == []
    assert verify_chain(RUN_ID, entries) == [f"{RUN_ID}: missing position 2"]


def _signing_key(path: Path) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return key


async def test_checkpoints_chain_ended_runs_heads_and_are_signed(
    run_engine: AsyncEngine, through: dict[str, Any], tmp_path: Path
) -> None:
    key = _signing_key(tmp_path / "key.pem")
    signer = load_signer(tmp_path / "key.pem")
    run_ids = [f"run-c{n}" for n in range(3)]
    async with running_writer(
        run_engine, **through, checkpoint_runs=2, checkpoint_signer=signer
    ) as writer:
        for run_id in run_ids:
            await writer.start_run(started_run(run_id))
            await writer.submit(
                succeeded_receipt(0, {"n": 0})._replace(run_id=run_id, receipt_id=run_id)
            )
            if run_id == run_ids[-1]:  # ended in a session of the service's (router runs)
                writer.run_ended(run_id)
                await writer.flush()
            else:
                await writer.end_run(run_end(run_id, status="succeeded", call_count=1))
        async with create_session_factory(run_engine)() as session:
            before_close = (await session.scalars(select(ChainCheckpoint))).all()
        assert [checkpoint.seq for checkpoint in before_close] == [1]
    async with create_session_factory(run_engine)() as session:
        stored = list(
            (await session.scalars(select(ChainCheckpoint).order_by(ChainCheckpoint.seq))).all()
        )
    assert [checkpoint.seq for checkpoint in stored] == [1, 2]  # the last one at close
    checkpoints = [
        Checkpoint(
            row.seq,
            row.created_at,
            tuple(RunHead(run["run_id"], run["length"], run["head"]) for run in row.runs),
            row.prev,
            row.link,
        )
        for row in stored
    ]
    assert verify_checkpoints(checkpoints) == []
    covered = {run.run_id: run for checkpoint in checkpoints for run in checkpoint.runs}
    assert sorted(covered) == run_ids
    for run_id in run_ids:
        entries, _ = await stored_chain(run_engine, run_id)
        last = max(entries, key=lambda entry: entry.position)
        assert (covered[run_id].length, covered[run_id].head) == (last.position, last.link)
    for row in stored:
        assert row.key_id == signer.key_id
        assert row.signature is not None
        assert verify(key.public_key(), row.link, row.signature)


async def test_the_first_run_end_after_the_utc_day_changes_writes_a_checkpoint(
    run_engine: AsyncEngine, through: dict[str, Any]
) -> None:
    now = [datetime(2026, 3, 1, 23, 59, tzinfo=UTC)]
    sessions = create_session_factory(run_engine)

    async def checkpoints() -> list[ChainCheckpoint]:
        async with sessions() as session:
            return list(
                (await session.scalars(select(ChainCheckpoint).order_by(ChainCheckpoint.seq))).all()
            )

    async def run(writer: GroupCommitWriter, run_id: str) -> None:
        await writer.start_run(started_run(run_id))
        await writer.submit(
            succeeded_receipt(0, {"n": 0})._replace(run_id=run_id, receipt_id=run_id)
        )
        await writer.end_run(run_end(run_id, status="succeeded", call_count=1))

    async with running_writer(
        run_engine, **through, checkpoint_runs=100, clock=lambda: now[0]
    ) as writer:
        await run(writer, "run-day-1")
        await run(writer, "run-day-1b")
        assert await checkpoints() == []  # the same day, far from `checkpoint_runs`
        now[0] += timedelta(minutes=2)  # past midnight, UTC
        await run(writer, "run-day-2")
        (checkpoint,) = await checkpoints()
        assert sorted(run["run_id"] for run in checkpoint.runs) == [
            "run-day-1",
            "run-day-1b",
            "run-day-2",
        ]
        await run(writer, "run-day-2b")
        assert len(await checkpoints()) == 1  # the new day's period has just begun
    assert [row.seq for row in await checkpoints()] == [1, 2]  # the last one at close
