from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.contract.callables import CallableError, require_one_argument, resolve_callable
from tests.contract.fixtures_callables import good
from tests.contract.helpers import BAD, GOOD, base_registry, only_problem, problems_of, write


def test_sync_and_async_functions_resolve() -> None:
    sync = resolve_callable(f"{GOOD}:transform")
    assert (sync.ref, sync.function, sync.is_async) == (f"{GOOD}:transform", good.transform, False)
    assert resolve_callable(f"{GOOD}:fetch").is_async is True


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            "tests.contract.no_such_module:run",
            "cannot import module 'tests.contract.no_such_module': ModuleNotFoundError",
        ),
        (f"{GOOD}:missing", f"'{GOOD}:missing' does not exist"),
        (
            f"{GOOD}:_private_function",
            "is not public: '_private_function' starts with an underscore",
        ),
        (f"{GOOD}:_hidden", "is not public: '_hidden'"),
        (
            "tests.contract.fixtures_callables._private_pkg:hidden_tool",
            "is not public: '_private_pkg'",
        ),
        (f"{BAD}:ToolClass", "is a class, not a plain or async function"),
        (f"{BAD}:builtin_tool", "is a builtin, not a plain or async function"),
        ("builtins:len", "is a builtin"),
        ("logging.os:system", "cannot import module 'logging.os': ModuleNotFoundError"),
        ("os:system", "is a builtin"),
        ("asyncio:sleep", "is re-exported from 'asyncio.tasks'"),
        ("logging:os", "is a module"),
        (f"{BAD}:lambda_tool", "is a lambda; register a named function"),
        (f"{BAD}:partial_tool", "is a partial, not a plain or async function"),
        (f"{BAD}:instance_tool", "is a ToolClass, not a plain or async function"),
        (f"{BAD}:not_callable", "is a non-callable int"),
        (f"{BAD}:generator_tool", "is a generator function"),
        (f"{BAD}:async_generator_tool", "is a generator function"),
        (f"{BAD}:join", "is re-exported from 'posixpath'"),
        (f"{BAD}:reexported", f"is re-exported from '{GOOD}'"),
        ("tests.contract.fixtures_callables:transform", f"is re-exported from '{GOOD}'"),
        (f"{BAD}:alias_tool", "is an alias of 'original'"),
        (f"{BAD}:nested_tool", "is an alias of 'outer.<locals>.inner'"),
    ],
)
def test_refused_targets(ref: str, message: str) -> None:
    # The module allowed explicitly: standard-library modules get past their own refusal.
    with pytest.raises(CallableError) as info:
        resolve_callable(ref, [ref.partition(":")[0]])
    assert message in str(info.value)


@pytest.mark.parametrize(
    "ref", ["subprocess:run", "shutil:rmtree", "os:popen", "os.path:join", "logging.os:system"]
)
def test_standard_library_callables_are_refused_before_import(ref: str) -> None:
    module = ref.partition(":")[0]
    with pytest.raises(CallableError) as info:
        resolve_callable(ref)
    assert str(info.value) == (
        f"module {module!r} is in Python's standard library; list it in "
        "TOOLLOOP_ALLOWED_MODULES (--allowed-module) to allow its callables"
    )


def test_a_standard_library_module_listed_explicitly_is_allowed() -> None:
    assert resolve_callable("shlex:quote", ["shlex"]).ref == "shlex:quote"
    assert resolve_callable("json.decoder:py_scanstring", ["json"]).ref.startswith("json.")
    with pytest.raises(CallableError, match="outside the allowed modules"):
        resolve_callable("shlex:quote", ["demo_app"])
    with pytest.raises(CallableError, match="standard library"):
        resolve_callable("shlex:quote", None)


def test_a_standard_library_refusal_in_a_registry_names_the_file_and_key_path(
    tmp_path: Path,
) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"]["callable"] = "subprocess:run"
    path = write(tmp_path, "r.yml", registry)
    problem = only_problem([path])
    assert problem.file == str(path)
    assert problem.path == "subagents.worker-a.tools.transform.callable"
    assert "'subprocess' is in Python's standard library" in problem.message


def test_refusal_in_a_registry_names_the_key_path(tmp_path: Path) -> None:
    registry = base_registry()
    registry["subagents"]["worker-a"]["tools"]["transform"]["callable"] = "logging.os:system"
    problem = only_problem(
        [write(tmp_path, "r.yml", registry)], allowed_modules=["logging", "tests"]
    )
    assert problem.path == "subagents.worker-a.tools.transform.callable"
    assert problem.message == (
        "cannot import module 'logging.os': ModuleNotFoundError: No module named 'logging.os'"
    )


def test_allowlist_matches_whole_module_prefixes() -> None:
    assert resolve_callable(f"{GOOD}:transform", ["tests.contract"]).function is good.transform
    assert resolve_callable(f"{GOOD}:transform", [GOOD]).function is good.transform
    with pytest.raises(CallableError, match="outside the allowed modules"):
        resolve_callable(f"{GOOD}:transform", ["tests.con"])
    with pytest.raises(CallableError, match="outside the allowed modules"):
        resolve_callable(f"{GOOD}:transform", [])


def test_allowlist_is_checked_before_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "side_effect_mod.py").write_text("raise SystemExit('imported!')\n")
    with pytest.raises(CallableError, match="outside the allowed modules"):
        resolve_callable("side_effect_mod:run", ["demo_app"])
    assert "side_effect_mod" not in sys.modules


def test_allowlist_applies_to_every_registry_callable(tmp_path: Path) -> None:
    problems = problems_of([write(tmp_path, "r.yml", base_registry())], ["demo_app"])
    assert [p.path for p in problems] == [
        "subagents.worker-a.tools.transform.callable",
        "subagents.worker-a.tools.fetch.callable",
        "guardrails.guard.callable",
        "verifiers.verify.callable",
        "hooks.evidence[0]",
    ]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def run(:\n", "SyntaxError"),
        ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
        ("import no_such_dependency_xyz\n", "ModuleNotFoundError"),
    ],
)
def test_import_failures_are_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, message: str
) -> None:
    name = f"broken_{abs(hash(source))}"
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / f"{name}.py").write_text(source)
    with pytest.raises(CallableError) as info:
        resolve_callable(f"{name}:run")
    assert f"cannot import module {name!r}: {message}" in str(info.value)


def test_policy_callables_take_one_argument() -> None:
    require_one_argument(resolve_callable(f"{GOOD}:guard"))
    with pytest.raises(CallableError, match="exactly one positional argument"):
        require_one_argument(resolve_callable(f"{GOOD}:two_arguments"))
    with pytest.raises(CallableError, match="exactly one positional argument"):
        require_one_argument(resolve_callable(f"{GOOD}:fetch_nothing"))


@pytest.mark.parametrize(
    "path",
    ["guardrails.guard.callable", "verifiers.verify.callable", "hooks.evidence[0]"],
)
def test_policies_and_hooks_are_checked_like_tools(tmp_path: Path, path: str) -> None:
    registry = base_registry()
    ref = f"{GOOD}:two_arguments"
    if path.startswith("hooks"):
        registry["hooks"]["evidence"] = [ref]
    else:
        registry[path.split(".")[0]][path.split(".")[1]]["callable"] = ref
    problem = only_problem([write(tmp_path, "r.yml", registry)])
    assert problem.path == path
    assert "must accept exactly one positional argument" in problem.message
