from __future__ import annotations

import pytest

from app.api.auth.principal import (
    ADMIN,
    METRICS_READ,
    OPEN,
    PLANS_EXECUTE,
    ROUTER_RUN,
    RUNS_READ,
    RUNS_READ_ALL,
    SCOPES,
    Principal,
)


def key(*scopes: str, name: str = "worker") -> Principal:
    return Principal(name=name, scopes=frozenset(scopes))


def test_a_key_has_exactly_its_scopes() -> None:
    caller = key(PLANS_EXECUTE)

    assert caller.has(PLANS_EXECUTE)
    assert not caller.has(ROUTER_RUN)
    assert not caller.has(RUNS_READ)
    assert not caller.has(METRICS_READ)
    assert not caller.has(ADMIN)


def test_admin_implies_every_scope() -> None:
    assert all(key(ADMIN).has(scope) for scope in SCOPES)
    assert key(ADMIN).can_read_all_runs


def test_runs_read_all_implies_runs_read_only() -> None:
    operator = key(RUNS_READ_ALL)

    assert operator.has(RUNS_READ)
    assert operator.can_read_all_runs
    assert not operator.has(PLANS_EXECUTE)
    assert not key(RUNS_READ).can_read_all_runs


def test_open_principal_has_no_name_and_every_scope() -> None:
    assert OPEN.name is None
    assert OPEN.scopes == SCOPES
    assert OPEN.can_read_all_runs


def test_a_key_sees_only_its_own_runs() -> None:
    reader = key(RUNS_READ, PLANS_EXECUTE, name="worker")

    assert reader.can_see_run("worker")
    assert not reader.can_see_run("other")
    assert not reader.can_see_run(None)
    assert reader.visible_run_creator == "worker"


def test_a_key_without_runs_read_sees_no_run_not_even_its_own() -> None:
    writer = key(PLANS_EXECUTE, name="worker")

    assert not writer.can_see_run("worker")
    with pytest.raises(RuntimeError, match="runs:read"):
        _ = writer.visible_run_creator


@pytest.mark.parametrize("caller", [key(RUNS_READ_ALL), key(ADMIN), OPEN])
def test_operators_see_every_run(caller: Principal) -> None:
    assert caller.can_see_run("someone-else")
    assert caller.can_see_run(None)
    assert caller.visible_run_creator is None
