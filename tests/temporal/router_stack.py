"""What the router runs' Temporal tests share: the scripted model served on
127.0.0.1, a stack whose workers hold its profiles, and the wait for a run's end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.fake_llm import FakeLLM, profiles_yaml, serve
from tests.support.waiting import wait_for_sync
from tests.temporal.conftest import Stack, open_stack

ROUTER_ENDED = ("done", "incomplete", "error", "cancelled", "interrupted")


def served_model() -> Iterator[tuple[FakeLLM, str]]:
    """The scripted model and its base URL, while it is served."""
    fake = FakeLLM()
    with serve(fake) as base_url:
        yield fake, base_url


def open_router_stack(workdir: Path, env: dict[str, str], base_url: str) -> Stack:
    """Serve and two workers whose profiles reach the model at `base_url`, one attempt
    per model request."""
    profiles = workdir / "profiles.yml"
    profiles.write_text(profiles_yaml(base_url))
    env = {**env, "TOOLLOOP_PROFILES": str(profiles), "TOOLLOOP_LLM_MAX_ATTEMPTS": "1"}
    return open_stack(workdir, env, workers=2)


def scripted(fake: FakeLLM) -> Iterator[FakeLLM]:
    """The model for one test, which must ask for every reply it scripted."""
    yield fake
    assert fake.remaining == 0, "the run did not ask for every scripted reply"


def router_ended(stack: Stack, run_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        view: dict[str, Any] = stack.get(f"/runs/{run_id}").json()
        return view if view["status"] in ROUTER_ENDED else None

    return wait_for_sync(ended, f"router run {run_id} ended", bound_s=120, every_s=0.1)
