"""A serving process freezes its startup heap: full collections skip what lives forever."""

from __future__ import annotations

import gc

from app.api.app import create_app
from app.settings import Settings


async def test_the_heap_is_frozen_once_the_app_started(settings: Settings) -> None:
    gc.unfreeze()
    app = create_app(settings, freeze_heap=True)
    try:
        async with app.router.lifespan_context(app):
            assert gc.get_freeze_count() > 0
            # What the runtime built at start is frozen too, not only the modules.
            assert gc.get_freeze_count() > len(gc.get_objects())
    finally:
        gc.unfreeze()


async def test_an_app_built_for_tests_freezes_nothing(settings: Settings) -> None:
    gc.unfreeze()
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() == 0
