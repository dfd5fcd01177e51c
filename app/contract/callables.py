"""Resolve `package.module:function` references to public, plain functions.

A reference resolves only to a function (sync or async, not a generator)
defined at the top level of the module it names: no private path segment, no
class, builtin, lambda, partial or other callable object, and no name that a
module merely re-exports (`logging.os:system`, `from x import f`), so the
registry always names where the code lives. With an allowlist, modules outside
it are refused before anything is imported. A module of Python's standard
library (`subprocess:run`, `shutil:rmtree`, `os:popen`) is refused, also before
import, unless the allowlist names it or a package above it: a registry that
can reach the standard library can run any command.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from app.contract.compiled import ResolvedCallable


class CallableError(Exception):
    pass


def resolve_callable(ref: str, allowed_modules: Sequence[str] | None = None) -> ResolvedCallable:
    module_name, _, function_name = ref.partition(":")
    if not module_name or not function_name:
        raise CallableError(f"{ref!r} is not a callable reference 'package.module:function'")
    private = [part for part in (*module_name.split("."), function_name) if part.startswith("_")]
    if private:
        raise CallableError(f"{ref!r} is not public: {private[0]!r} starts with an underscore")
    allowed = allowed_modules is not None and _is_allowed(module_name, allowed_modules)
    if allowed_modules is not None and not allowed:
        raise CallableError(
            f"module {module_name!r} is outside the allowed modules ({', '.join(allowed_modules)})"
        )
    if not allowed and is_standard_library(module_name):
        raise CallableError(
            f"module {module_name!r} is in Python's standard library; list it in "
            "TOOLLOOP_ALLOWED_MODULES (--allowed-module) to allow its callables"
        )
    function = _check_function(ref, _attribute(_import(module_name), ref, function_name))
    if function.__module__ != module_name:
        raise CallableError(
            f"{ref!r} is re-exported from {function.__module__!r}; register it where it is defined"
        )
    if function.__qualname__ != function_name:
        raise CallableError(
            f"{ref!r} is an alias of {function.__qualname__!r}; "
            "register the function under its own name"
        )
    return ResolvedCallable(
        ref=ref, function=function, is_async=inspect.iscoroutinefunction(function)
    )


def require_one_argument(resolved: ResolvedCallable) -> None:
    """Policy callables (guardrails, verifiers, hooks) are called with one positional argument."""
    try:
        inspect.signature(resolved.function).bind(None)
    except TypeError:
        raise CallableError(
            f"{resolved.ref!r} must accept exactly one positional argument"
        ) from None


def is_standard_library(module_name: str) -> bool:
    return module_name.partition(".")[0] in sys.stdlib_module_names


def _is_allowed(module_name: str, allowed_modules: Sequence[str]) -> bool:
    return any(
        module_name == prefix or module_name.startswith(prefix + ".") for prefix in allowed_modules
    )


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:
        raise CallableError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None


def _attribute(module: Any, ref: str, name: str) -> Any:
    try:
        return getattr(module, name)
    except AttributeError:
        raise CallableError(f"{ref!r} does not exist") from None
    except Exception as exc:
        raise CallableError(f"{ref!r} cannot be looked up: {type(exc).__name__}: {exc}") from None


def _check_function(ref: str, target: Any) -> Callable[..., Any]:
    if not inspect.isfunction(target):
        raise CallableError(f"{ref!r} is a {_kind(target)}, not a plain or async function")
    if target.__name__ == "<lambda>":
        raise CallableError(f"{ref!r} is a lambda; register a named function")
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise CallableError(f"{ref!r} is a generator function; it must return its result")
    return target


def _kind(target: Any) -> str:
    if inspect.isclass(target):
        return "class"
    if inspect.isbuiltin(target):
        return "builtin"
    if inspect.ismodule(target):
        return "module"
    return type(target).__name__ if callable(target) else f"non-callable {type(target).__name__}"
