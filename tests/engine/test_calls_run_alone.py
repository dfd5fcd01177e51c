"""A plan's call run alone (a remote worker's way): its fixed place in the run, the
receipts of calls settled elsewhere, and `requires` over what was settled before."""

from __future__ import annotations

from typing import Any, NamedTuple

from app.engine.failures import not_run_after
from app.engine.receipt import ErrorKind, Status
from app.engine.run import RunKind
from tests.engine.harness import Harness, tool

MODULE = "tests.engine.requires_tools"


def tools() -> dict[str, Any]:
    return {
        "read": tool("aecho", effect="read"),
        "write": tool("aecho", effect="non_idempotent"),
        "fetch": tool("aecho", callable=f"{MODULE}:fetch", effect="read"),
        "publish": tool(
            "aecho", callable=f"{MODULE}:publish", requires={"after": ["fetch"]}, effect="read"
        ),
    }


async def test_a_call_run_alone_takes_the_place_it_is_given(make_harness: Any) -> None:
    harness: Harness = make_harness(tools())
    run = harness.identity()
    state = harness.engine.open_run(run, RunKind.SEQUENTIAL, first_seq=100)

    receipt = await harness.engine.run_call(state, "read", {"x": 1}, call_key="c5", seq=5)

    assert receipt.seq == 5
    assert receipt.status is Status.SUCCEEDED
    assert receipt.idempotency_key == f"{run.run_id}:5"
    assert state.next_seq == 100  # the run's own numbering is untouched


async def test_calls_settled_elsewhere_get_durable_receipts(make_harness: Any) -> None:
    harness: Harness = make_harness(tools())
    state = harness.engine.open_run(harness.identity(), RunKind.PARALLEL, first_seq=10)
    engine = harness.engine

    lost = await engine.record_settled_elsewhere(
        state, [(0, "a", "write", {}), (1, "b", "read", {})], "lane", error=None
    )
    skipped = await engine.record_settled_elsewhere(
        state, [(2, "c", "read", {})], "lane", error=not_run_after("b")
    )

    assert [r.status for r in lost] == [Status.FAILED, Status.FAILED]
    assert [r.error.kind if r.error else None for r in lost] == [ErrorKind.INTERRUPTED] * 2
    assert [r.error.outcome_unknown if r.error else None for r in lost] == [True, False]
    assert [r.item_key for r in lost] == ["lane", "lane"]
    assert skipped[0].status is Status.SKIPPED
    assert [r.seq for r in harness.receipts.receipts] == [0, 1, 2]


class _Stored(NamedTuple):
    tool: str
    item_key: str | None
    status: str


async def test_requires_counts_what_was_settled_before_the_state_was_opened(
    make_harness: Any,
) -> None:
    harness: Harness = make_harness(tools())
    engine = harness.engine
    run = harness.identity()

    alone = engine.open_run(run, RunKind.SEQUENTIAL, first_seq=10)
    refused = await engine.run_call(alone, "publish", {}, call_key="p", seq=1)
    recalled = engine.open_run(run, RunKind.SEQUENTIAL, first_seq=10)
    engine.recall(recalled, [_Stored("fetch", None, "succeeded")])
    allowed = await engine.run_call(recalled, "publish", {}, call_key="p", seq=1)

    assert refused.status is Status.SKIPPED
    assert refused.error is not None
    assert refused.error.kind is ErrorKind.REQUIRES
    assert allowed.status is Status.SUCCEEDED
