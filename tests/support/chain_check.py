"""Every hash chain in a database, recomputed from its rows as stored
(`app.foundation.chain` alone), with its checkpoints."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import inspect, select

from app.foundation.chain import (
    AUDIT_EVENTS,
    RECEIPTS,
    Checkpoint,
    Entry,
    RunHead,
    chain_id_of,
    row_digest,
    verify_chain,
    verify_checkpoints,
)
from app.store.database import create_database_engine, create_session_factory
from app.store.models import AuditEvent, ChainCheckpoint, Receipt


def _columns(row: Any) -> dict[str, Any]:
    return {column.name: getattr(row, column.key) for column in type(row).__table__.columns}


async def assert_chains_intact(database_url: str) -> None:
    assert await chain_problems(database_url) == []


async def chain_problems(database_url: str) -> list[str]:
    """The problems of every chain and of the checkpoints (empty: all intact); a row
    without chain columns is a problem too (every row here is written chained)."""
    engine = create_database_engine(database_url)
    try:
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
        if "chain_checkpoints" not in tables:
            return []  # no service ran on it
        async with create_session_factory(engine)() as session:
            receipts = (await session.scalars(select(Receipt))).all()
            audit = (await session.scalars(select(AuditEvent))).all()
            stored = (
                await session.scalars(select(ChainCheckpoint).order_by(ChainCheckpoint.seq))
            ).all()
    finally:
        await engine.dispose()
    entries: dict[str, list[Entry]] = defaultdict(list)
    superseded: dict[str, list[Entry]] = defaultdict(list)
    problems: list[str] = []
    for table, rows in ((RECEIPTS, receipts), (AUDIT_EVENTS, audit)):
        for row in rows:
            chain_id = row.run_id if table == RECEIPTS else chain_id_of(row.run_id, row.at)
            if row.chain_seq is None or row.chain_link is None:
                problems.append(f"{chain_id}: an unchained {table} row")
                continue
            columns = _columns(row)
            entries[chain_id].append(
                Entry(row.chain_seq, row_digest(table, columns), row.chain_link)
            )
            detail = columns.get("detail")
            former = detail.get("chain") if isinstance(detail, dict) else None
            if former is not None:
                superseded[chain_id].append(Entry(former["seq"], former["digest"], former["link"]))
    for chain_id, found in entries.items():
        problems += verify_chain(chain_id, found, superseded.get(chain_id, ()))
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
    problems += verify_checkpoints(checkpoints)
    for checkpoint in checkpoints:
        for run in checkpoint.runs:
            at = {entry.position: entry.link for entry in entries.get(run.run_id, [])}
            former = {entry.position: entry.link for entry in superseded.get(run.run_id, [])}
            if {**former, **at}.get(run.length) != run.head:
                problems.append(f"checkpoint {checkpoint.seq}: {run.run_id}'s head differs")
    return problems
