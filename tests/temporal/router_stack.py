"""What the router runs' Temporal tests share beside the conftest's `model` and `fake`:
a stack whose workers hold the model's profiles, and the wait for a run's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.fake_llm import profiles_yaml
from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack, open_stack

ROUTER_ENDED = ("done", "incomplete", "error", "cancelled", "interrupted")


def open_router_stack(workdir: Path, env: dict[str, str], base_url: str) -> Stack:
    """Serve and two workers whose profiles reach the model at `base_url`, one attempt
    per model request."""
    profiles = workdir / "profiles.yml"
    profiles.write_text(profiles_yaml(base_url))
    env = {**env, "TOOLLOOP_PROFILES": str(profiles), "TOOLLOOP_LLM_MAX_ATTEMPTS": "1"}
    return open_stack(workdir, env, workers=2)


def router_ended(stack: Stack, run_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        view: dict[str, Any] = stack.get(f"/runs/{run_id}").json()
        return view if view["status"] in ROUTER_ENDED else None

    return wait_for_sync(ended, f"router run {run_id} ended", bound_s=120, every_s=0.1)
