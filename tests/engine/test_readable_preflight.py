"""Preflight of the readable parts of a body of the wrong shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.contract import Contract, load_contract
from app.engine.plan import PlanLimits, PlannedCall
from app.engine.readable_preflight import (
    ReadableCall,
    ReadableChain,
    ReadablePlan,
    readable_problems,
)
from tests.engine.test_preflight import REGISTRY


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> Contract:
    path: Path = tmp_path_factory.mktemp("registry") / "registry.yaml"
    path.write_text(REGISTRY, encoding="utf-8")
    return load_contract([path], ["tests.engine.preflight_tools"])


def readable(
    index: int, tool: str, key: str | None, args: dict[str, object] | None
) -> ReadableCall:
    planned = None if args is None else PlannedCall(key or "", tool, args)
    return ReadableCall(index, tool, key, planned)


def found(plan: ReadablePlan, contract: Contract) -> list[tuple[str, str]]:
    return [(p.pointer, p.message) for p in readable_problems(plan, contract, PlanLimits())]


def test_without_an_owner_tools_are_checked_but_not_against_an_allowlist(
    contract: Contract,
) -> None:
    plan = ReadablePlan(
        owner=None,
        chains=(
            ReadableChain(
                "/calls",
                4,
                (
                    readable(0, "foreign", "a", {"y": 1}),
                    readable(2, "missing", "b", {}),
                    readable(3, "transform", "a", None),
                ),
            ),
        ),
    )

    assert found(plan, contract) == [
        ("/calls/3/call_key", "duplicate call_key 'a': at indices 0 and 3"),
        ("/calls/2/tool", "unknown tool 'missing'"),
    ]


def test_a_readable_owner_and_the_limits_are_checked(contract: Contract) -> None:
    plan = ReadablePlan(
        owner="worker-a",
        chains=(ReadableChain("/lanes/1/calls", 0, ()),),
        parallel=True,
        lane_count=2,
        item_keys=((0, "x"), (1, "x")),
        max_concurrency=0,
        deadline_s=-1.0,
    )

    assert found(plan, contract) == [
        ("/max_concurrency", "max_concurrency must be between 1 and 1000"),
        ("/lanes/1/item_key", "duplicate item_key 'x': at indices 0 and 1"),
        ("/lanes/1/calls", "at least one call is required"),
        ("/deadline_s", "deadline_s must be a positive number of seconds"),
    ]


def test_an_unknown_owner_is_named(contract: Contract) -> None:
    plan = ReadablePlan(owner="nobody", chains=())
    assert found(plan, contract) == [("/owner", "unknown owner 'nobody'")]
