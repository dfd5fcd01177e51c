"""The API tests' default settings: the example registry on the test's database (`app` and
`client` follow them, `tests/support/fixtures.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "registries" / "example.yml"


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(registries=[EXAMPLE_REGISTRY], database_url=database_url)
