"""Helpers for the router's HTTP tests (tests/api/router/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.settings import Settings
from tests.router.registry import write_registry
from tests.support.fake_llm import profiles_yaml


def router_settings(database_url: str, tmp_path: Path, base_url: str, **overrides: Any) -> Settings:
    profiles = tmp_path / "profiles.yml"
    profiles.write_text(profiles_yaml(base_url))
    values: dict[str, Any] = {
        "registries": [write_registry(tmp_path)],
        "database_url": database_url,
        "profiles": profiles,
        "llm_max_attempts": 2,
        "llm_backoff_s": 0.0,
        "llm_retry_after_max_s": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


# The keys of a router run's outcome (`POST /router/runs`).
OUTCOME_KEYS = {
    "run_id",
    "status",
    "stopped_by",
    "text",
    "final",
    "attempts",
    "turns",
    "state",
    "receipts",
    "pending",
}


def run_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "owner": "agent",
        "goal": "Find out what toolloop is.",
        "context": {"trace_id": "t-1"},
        "router_profile": "router-small",
        "final_profile": "final-local",
    }
    body.update(overrides)
    return body
