from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from app.contract import NO_RETRY, ContractProblem, Effect, RegistryError, load_contract
from app.foundation.canonical import canonical_json, sha256_digest
from tests.contract.fixtures_callables import good
from tests.contract.helpers import (
    GOOD,
    base_registry,
    load,
    only_problem,
    owner,
    problems_of,
    transform_tool,
    write,
)


def test_compiles_tools_owners_and_policies(tmp_path: Path) -> None:
    contract = load([write(tmp_path, "r.yml", base_registry())])
    transform = contract.tools["transform"]
    assert transform.owner == "worker-a"
    assert transform.target.function is good.transform
    assert transform.timeout_s == 120
    assert transform.retry is NO_RETRY
    assert transform.effect is Effect.NON_IDEMPOTENT
    assert not transform.cacheable
    assert transform.input_schema.is_closed_object
    assert contract.tools["fetch"].target.is_async
    assert contract.tools["fetch"].effect is Effect.READ
    assert contract.owners["worker-a"].tools["transform"] is transform
    assert contract.owners["worker-a"].runner_defaults.allowed_tools == ("transform", "fetch")
    assert contract.guardrails["guard"].target.function is good.guard
    assert contract.verifiers["verify"].target.is_async
    assert [hook.ref for hook in contract.evidence_hooks] == [f"{GOOD}:record"]
    assert contract.hash.startswith("sha256:")


def test_every_optional_tool_field_compiles(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["fetch"].update(
        timeout_s=2.5,
        cache_ttl_s=60,
        retry={"max_attempts": 3, "backoff_s": 0.5},
        max_concurrency=2,
        rate_limit={"per_second": 5, "burst": 2},
        redact=["token", "password"],
        requires={"after": ["transform"], "max_per_run": 3},
        requires_confirmation=True,
    )
    fetch = load([write(tmp_path, "r.yml", registry)]).tools["fetch"]
    assert fetch.timeout_s == 2.5
    assert fetch.cache_ttl_s == 60
    assert (fetch.retry.max_attempts, fetch.retry.backoff_s, fetch.retry.backoff_max_s) == (
        3,
        0.5,
        0.5,
    )
    assert fetch.max_concurrency == 2
    assert fetch.rate_limit is not None
    assert fetch.rate_limit.burst == 2
    assert fetch.redact == frozenset({"token", "password"})
    assert fetch.requires is not None
    assert (fetch.requires.after, fetch.requires.max_per_run) == (("transform",), 3)
    assert fetch.requires_confirmation


def test_contract_mappings_are_read_only(tmp_path: Path) -> None:
    contract = load([write(tmp_path, "r.yml", base_registry())])
    assert isinstance(contract.tools, MappingProxyType)
    assert isinstance(contract.owners["worker-a"].tools, MappingProxyType)
    with pytest.raises(TypeError):
        contract.tools["x"] = contract.tools["transform"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        contract.hash = "sha256:0"  # type: ignore[misc]


def test_canonical_form_is_what_is_hashed(tmp_path: Path) -> None:
    contract = load([write(tmp_path, "r.yml", base_registry())])
    assert sha256_digest(canonical_json(contract.canonical)) == contract.hash
    assert set(contract.canonical) == {"owners", "tools", "guardrails", "verifiers", "hooks"}
    assert str(tmp_path) not in canonical_json(contract.canonical).decode()


def test_hash_ignores_key_order_file_path_and_file_order(tmp_path: Path) -> None:
    registry = base_registry()
    one = load([write(tmp_path, "a/one.yml", registry)])
    reordered = yaml.safe_dump(registry, sort_keys=True)
    assert reordered != yaml.safe_dump(registry, sort_keys=False)
    two = load([write(tmp_path, "b/elsewhere.yml", reordered)])
    assert one.hash == two.hash

    policies = {key: registry.pop(key) for key in ("guardrails", "verifiers", "hooks")}
    split = [write(tmp_path, "c/tools.yml", registry), write(tmp_path, "c/policies.yml", policies)]
    assert load(split).hash == one.hash
    assert load(split[::-1]).hash == one.hash


def test_explicit_defaults_hash_like_omitted_ones(tmp_path: Path) -> None:
    registry = base_registry()
    plain = load([write(tmp_path, "a.yml", registry)])
    registry["subagents"]["worker-a"]["tools"]["transform"].update(
        cacheable=False, effect="non_idempotent", requires_confirmation=False, redact=[]
    )
    registry["subagents"]["worker-a"]["runner_defaults"]["tool_timeout_s"] = 120.0
    explicit = load([write(tmp_path, "b.yml", registry)])
    assert explicit.hash == plain.hash
    assert explicit.tools["transform"].definition_hash == plain.tools["transform"].definition_hash


def test_a_changed_description_changes_that_tool_only(tmp_path: Path) -> None:
    registry = base_registry()
    before = load([write(tmp_path, "a.yml", registry)])
    registry["subagents"]["worker-a"]["tools"]["transform"]["description"] = "Shout one text."
    after = load([write(tmp_path, "b.yml", registry)])
    assert after.hash != before.hash
    assert after.tools["transform"].definition_hash != before.tools["transform"].definition_hash
    assert after.tools["fetch"].definition_hash == before.tools["fetch"].definition_hash


def test_same_tool_id_in_two_files_names_both(tmp_path: Path) -> None:
    first = write(tmp_path, "first.yml", base_registry())
    second = write(
        tmp_path, "second.yml", {"subagents": {"worker-b": owner(transform=transform_tool())}}
    )
    problem = only_problem([first, second])
    assert problem == ContractProblem(
        str(second),
        "subagents.worker-b.tools.transform",
        f"tool id 'transform' is already registered by owner 'worker-a' in {first}",
    )


def test_same_tool_id_under_two_owners_of_one_file(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-b"] = owner(fetch=transform_tool())
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert problem.path == "subagents.worker-b.tools.fetch"
    assert "already registered by owner 'worker-a'" in problem.message


def test_same_owner_in_two_files(tmp_path: Path) -> None:
    first = write(tmp_path, "first.yml", base_registry())
    second = write(
        tmp_path, "second.yml", {"subagents": {"worker-a": owner(other=transform_tool())}}
    )
    problem = only_problem([first, second])
    assert (problem.file, problem.path) == (str(second), "subagents.worker-a")
    assert problem.message == f"owner 'worker-a' is already declared in {first}"


@pytest.mark.parametrize("kind", ["guardrails", "verifiers"])
def test_same_policy_name_in_two_files(tmp_path: Path, kind: str) -> None:
    first = write(tmp_path, "first.yml", base_registry())
    name = "guard" if kind == "guardrails" else "verify"
    second = write(tmp_path, "second.yml", {kind: {name: base_registry()[kind][name]}})
    problem = only_problem([first, second])
    assert (problem.path, problem.message) == (
        f"{kind}.{name}",
        f"{name!r} is already declared in {first}",
    )


def test_same_evidence_hook_in_two_files(tmp_path: Path) -> None:
    first = write(tmp_path, "first.yml", base_registry())
    second = write(tmp_path, "second.yml", {"hooks": {"evidence": [f"{GOOD}:record"]}})
    assert only_problem([first, second]).path == "hooks.evidence[0]"


def test_a_file_listed_twice(tmp_path: Path) -> None:
    path = write(tmp_path, "r.yml", base_registry())
    problem = only_problem([path, tmp_path / "." / "r.yml"])
    assert problem.message == "the file is listed more than once"


def test_no_files_is_an_error() -> None:
    with pytest.raises(RegistryError, match="no registry file given"):
        load_contract([])


def test_registry_error_renders_one_line_per_problem(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"]["bogus"] = 1
    registry["guardrails"]["guard"]["bogus"] = 2
    path = write(tmp_path, "r.yml", registry)
    with pytest.raises(RegistryError) as info:
        load_contract([path])
    assert str(info.value).splitlines() == [
        f"{path}: subagents.worker-a.tools.transform.bogus: unknown field",
        f"{path}: guardrails.guard.bogus: unknown field",
    ]


def test_problems_across_files_are_reported_together(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yml"
    broken = write(tmp_path, "broken.yml", "a: [\n")
    registry = base_registry()
    registry["subagents"]["worker-a"]["runner_defaults"]["max_calls"] = 0
    invalid = write(tmp_path, "invalid.yml", registry)
    problems = problems_of([missing, broken, invalid])
    assert [p.file for p in problems] == [str(missing), str(broken), str(invalid)]


def test_a_shadow_guardrail_compiles_as_such_and_changes_the_hash(tmp_path: Path) -> None:
    plain = base_registry()
    enforcing = base_registry()
    enforcing["guardrails"]["guard"]["mode"] = "enforce"
    shadow = base_registry()
    shadow["guardrails"]["guard"]["mode"] = "shadow"
    contracts = [
        load([write(tmp_path / name, "r.yml", registry)])
        for name, registry in (("plain", plain), ("enforce", enforcing), ("shadow", shadow))
    ]

    assert [c.guardrails["guard"].shadow for c in contracts] == [False, False, True]
    assert contracts[0].hash == contracts[1].hash != contracts[2].hash
