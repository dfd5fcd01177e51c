"""The confirmation tests' app: the confirmation registry on the test's database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from app.settings import Settings
from tests.api.confirm import tools
from tests.api.confirm.registry import REGISTRY
from tests.support.app import AppFactory, Served, running


@pytest.fixture(autouse=True)
def _counted() -> Iterator[None]:
    tools.reset()
    yield
    tools.reset()


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


@pytest.fixture
async def served(settings: Settings) -> AsyncIterator[Served]:
    async with running(settings) as served:
        yield served
