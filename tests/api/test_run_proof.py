"""`GET /runs/{run_id}/proof` beside the other reads (tampering: tests/test_audit_commands.py)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import delete, update

from app.foundation import chain as links
from app.store.models import AuditEvent, ChainCheckpoint, Receipt

PLAN = {
    "owner": "text-worker",
    "calls": [
        {"call_key": "1", "tool": "word_count", "args": {"text": "a b"}},
        {"call_key": "2", "tool": "word_count", "args": {"text": "c"}},
    ],
}


async def _plan(client: httpx.AsyncClient) -> str:
    response = await client.post("/plans/sequential", json=PLAN)
    assert response.status_code == 200, response.text
    run_id: str = response.json()["plan_id"]
    return run_id


async def test_a_run_s_proof_lists_its_chain_in_order(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    run_id = await _plan(client)
    await app.state.runtime.writer.flush()

    response = await client.get(f"/runs/{run_id}/proof")

    assert response.status_code == 200
    proof = response.json()
    assert proof["run_id"] == run_id
    assert proof["check"]["intact"] is True
    receipts = [e for e in proof["entries"] if e["table"] == "receipts"]
    stored = (await client.get(f"/runs/{run_id}/receipts")).json()["items"]
    assert [e["row_id"] for e in receipts] == [r["receipt_id"] for r in stored]
    previous = links.genesis(run_id)
    for entry in proof["entries"]:
        assert entry["link"] == links.link(previous, entry["digest"])
        previous = entry["link"]
    assert proof["head"] == previous


async def test_rows_written_before_chaining_are_counted_not_reported(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    run_id = await _plan(client)
    await app.state.runtime.writer.flush()
    # As a run stored before the chain existed: no checkpoint holds it either.
    async with app.state.runtime.sessions() as session, session.begin():
        await session.execute(delete(ChainCheckpoint))
        for model in (Receipt, AuditEvent):
            await session.execute(
                update(model).where(model.run_id == run_id).values(chain_seq=None, chain_link=None)
            )

    proof = (await client.get(f"/runs/{run_id}/proof")).json()

    assert proof["entries"] == []
    assert proof["unchained"] > 0
    assert (proof["length"], proof["head"]) == (0, links.genesis(run_id))
    assert any("written before chaining" in note for note in proof["check"]["notes"])


async def test_an_unknown_run_has_no_proof(client: httpx.AsyncClient) -> None:
    response = await client.get("/runs/no-such-run/proof")

    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["detail"] == "There is no run with this id."
