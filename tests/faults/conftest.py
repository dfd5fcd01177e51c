"""Fixtures of the fault suites: the fault tools' registry and a fresh tool state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import fault_tools
from tests.faults.registry import write_registry


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    fault_tools.reset()
    yield
    fault_tools.reset()


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return write_registry(tmp_path)
