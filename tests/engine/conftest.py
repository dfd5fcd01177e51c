from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.engine import engine_tools
from tests.engine.harness import Harness, build_harness, write_contract


@pytest.fixture(autouse=True)
def _fresh_tool_state() -> Iterator[None]:
    engine_tools.reset()
    yield
    # A sync tool still blocked would keep a worker thread (and the process) alive.
    engine_tools.STATE.release.set()


@pytest.fixture
async def make_harness(tmp_path: Path) -> AsyncIterator[Any]:
    made: list[Harness] = []
    counter = iter(range(1000))

    def make(tools: Mapping[str, Mapping[str, Any]], **options: Any) -> Harness:
        contract_options = {
            key: options.pop(key) for key in ("other_tools", "hooks", "allowed") if key in options
        }
        contract = write_contract(
            tmp_path, tools, name=f"registry{next(counter)}.yml", **contract_options
        )
        harness = build_harness(contract, **options)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        await harness.engine.aclose()
