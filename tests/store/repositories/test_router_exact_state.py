"""A router run's exact state (Temporal executor): its conversation, the calls it
started, and forgetting both; and a run's usage all told from the ledger."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.store.repositories.router_exact_state import RouterExactStateRepository
from app.store.repositories.usage import RunUsage, UsageRepository
from tests.store.factories import create_run


async def test_a_run_keeps_its_conversation_and_started_calls_until_forgotten(
    session: AsyncSession,
) -> None:
    kept = RouterExactStateRepository(session)
    await create_run(session, "run-1")
    await create_run(session, "run-2")
    assert await kept.conversation("run-1") is None
    assert await kept.started_calls("run-1") == []

    await kept.add_started_call("run-1", {"seq": 0, "call_key": "t1c0", "tool": "t", "args": {}})
    await kept.keep_conversation("run-1", [{"role": "user", "content": "key sk-1"}])
    await kept.keep_conversation("run-1", [{"role": "user", "content": "key sk-2"}])
    await kept.add_started_call(
        "run-1", {"seq": 1, "call_key": "t2c0", "tool": "t", "args": {"secret": "x"}}
    )
    await kept.add_started_call("run-2", {"seq": 0, "call_key": "t1c0", "tool": "t", "args": {}})
    await session.commit()
    session.expunge_all()

    assert await kept.conversation("run-1") == [{"role": "user", "content": "key sk-2"}]
    assert [call["call_key"] for call in await kept.started_calls("run-1")] == ["t1c0", "t2c0"]
    assert (await kept.started_calls("run-1"))[1]["args"] == {"secret": "x"}
    await kept.forget("run-1")
    await session.commit()
    assert await kept.conversation("run-1") is None
    assert await kept.started_calls("run-1") == []
    assert len(await kept.started_calls("run-2")) == 1


async def test_a_runs_usage_all_told(session: AsyncSession) -> None:
    usage = UsageRepository(session)
    at = datetime(2026, 12, 7, 10, 30, tzinfo=UTC)
    hour = at.replace(minute=0)
    for run_id, tokens, cost in (("run-1", 10, 100), ("run-1", 20, None), ("run-2", 5, 7)):
        await usage.add(
            {
                "at": at,
                "hour": hour,
                "day": hour.replace(hour=0),
                "run_id": run_id,
                "owner": "o",
                "caller": "",
                "profile": "p",
                "role": "router",
                "input_tokens": tokens,
                "output_tokens": 1,
                "cost_nanos": cost,
            }
        )
    await session.commit()

    assert await usage.run_totals("run-1") == RunUsage(2, 30, 2, 100)
    assert await usage.run_totals("run-3") == RunUsage(0, 0, 0, None)
