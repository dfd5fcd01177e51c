"""Replica tests: two `toolloop serve` processes on one fresh PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.replicas.tools import FILES_ENV, write_registry
from tests.support.replicas import serve_env

pytestmark = pytest.mark.postgres


@pytest.fixture
def env(tmp_path: Path, postgres_url: str) -> dict[str, str]:
    return {**serve_env(postgres_url, [write_registry(tmp_path)]), FILES_ENV: str(tmp_path)}
