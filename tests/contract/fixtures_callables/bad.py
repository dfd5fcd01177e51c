"""Things a registry must not resolve to."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable, Iterator

from tests.contract.fixtures_callables.good import transform

join = os.path.join  # a function defined in another module (re-export)
reexported = transform
lambda_tool: Callable[[str], str] = lambda text: text  # noqa: E731
partial_tool = functools.partial(transform, "x")
builtin_tool = len
not_callable = 42


class ToolClass:
    def __call__(self, text: str) -> str:
        return text


instance_tool = ToolClass()


def outer() -> Callable[[], None]:
    def inner() -> None:
        return None

    return inner


nested_tool = outer()


def original(text: str) -> str:
    return text


alias_tool = original


def generator_tool() -> Iterator[int]:
    yield 1


async def async_generator_tool() -> AsyncIterator[int]:
    yield 1
