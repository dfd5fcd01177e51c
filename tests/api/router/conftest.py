"""Fixtures of the router's HTTP tests: the fake model served on 127.0.0.1 and the
service pointed at it (overriding the plain app of `tests/api/conftest.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings
from tests.router.http_support import router_settings


@pytest.fixture(autouse=True)
def _fresh_tools(fresh_router_tools: None) -> None:
    """Every test here starts with fresh router test tools."""


@pytest.fixture
def settings(database_url: str, tmp_path: Path, model_url: str) -> Settings:
    return router_settings(database_url, tmp_path, model_url)
