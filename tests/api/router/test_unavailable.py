"""The router fails closed at startup without profiles or prompts; plans keep working."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.service.errors import ROUTER_UNAVAILABLE
from app.settings import Settings
from tests.router.harness import PROMPTS_DIR
from tests.router.http_support import router_settings, run_body
from tests.support.app import running

PLAN = {"owner": "agent", "calls": [{"call_key": "1", "tool": "echo", "args": {"text": "x"}}]}


def broken_prompts(tmp_path: Path) -> Path:
    target = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, target)
    (target / "router.system.md").unlink()
    (target / "final.task.md").write_text("no front matter")
    return target


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no_profiles", "no model profiles file is configured (TOOLLOOP_PROFILES)"),
        ("bad_profiles", "profiles.router-small.provider"),
        ("no_prompts", "router.system.md: missing"),
        ("bad_prompts", "final.task.md: must start with YAML front matter"),
    ],
)
async def test_router_is_503_and_plans_are_200(
    database_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    case: str,
    expected: str,
) -> None:
    settings = router_settings(database_url, tmp_path, "http://127.0.0.1:9")
    changes: dict[str, Any] = {}
    if case == "no_profiles":
        changes["profiles"] = None
    elif case == "bad_profiles":
        assert settings.profiles is not None
        settings.profiles.write_text(
            settings.profiles.read_text().replace("provider: openai", "provider: bard", 1)
        )
    else:
        changes["prompts_dir"] = broken_prompts(tmp_path)
    settings = Settings(**(settings.model_dump() | changes))

    with caplog.at_level(logging.ERROR, logger="toolloop.router"):
        async with running(settings) as (_, client):
            router = await client.post("/router/runs", json=run_body())
            confirm = await client.post("/router/runs/x/confirmations/y", json={"approve": True})
            plan = await client.post("/plans/sequential", json=PLAN)

    assert router.status_code == 503
    assert router.headers["content-type"] == "application/problem+json"
    problem = router.json()
    assert problem["type"] == "urn:toolloop:problem:service-unavailable"
    # Why (files and keys of the server's configuration) is the log's to say.
    assert problem["detail"] == ROUTER_UNAVAILABLE
    assert expected not in router.text
    assert confirm.status_code == 503
    assert plan.status_code == 200
    assert plan.json()["status"] == "succeeded"
    (line,) = [r for r in caplog.records if r.name == "toolloop.router"]
    if case.endswith("_profiles"):  # the prompts loaded: replays need no profile
        assert line.getMessage().startswith("router runs need model profiles")
        assert "`toolloop router replay` are not affected" in line.getMessage()
    else:
        assert line.getMessage().startswith("router disabled")
    assert expected in line.getMessage()
