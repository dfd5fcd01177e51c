"""A serving process tunes its garbage collector: full collections skip what lives
forever, and the youngest generation is collected less often."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.api.app import create_app
from app.api.collector import SERVING_YOUNG_THRESHOLD
from app.settings import Settings


@pytest.fixture
def collector_restored() -> Iterator[tuple[int, int, int]]:
    gc.unfreeze()
    before = gc.get_threshold()
    try:
        yield before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


async def test_a_serving_app_freezes_its_startup_heap_and_collects_young_objects_less_often(
    settings: Settings, collector_restored: tuple[int, int, int]
) -> None:
    app = create_app(settings, tune_collector=True)
    assert gc.get_freeze_count() == 0  # nothing happens before the app starts
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() > 0
        # What the runtime built at start is frozen too, not only the modules.
        assert gc.get_freeze_count() > len(gc.get_objects())
        young, middle, oldest = gc.get_threshold()
        assert young == SERVING_YOUNG_THRESHOLD > collector_restored[0]
        assert (middle, oldest) == collector_restored[1:]


async def test_an_app_built_for_tests_leaves_the_collector_alone(
    settings: Settings, collector_restored: tuple[int, int, int]
) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == collector_restored
