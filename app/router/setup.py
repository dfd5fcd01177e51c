"""What the router loads at startup: model profiles and prompt files, and the model client.

Either failing (no profiles file, an invalid profile, a missing or invalid
prompt) leaves the router closed with every problem named; nothing falls back.
Prompts that loaded are kept even so: replaying a recording needs no profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx

from app.llm.client import LLMClient
from app.llm.profiles import Profiles, ProfilesError, load_profiles
from app.router.prompts import PromptError, PromptSet, load_prompts


@dataclass(frozen=True, slots=True)
class RouterSetup:
    profiles: Profiles | None
    prompts: PromptSet | None
    problems: tuple[str, ...]

    @property
    def ready(self) -> bool:
        return self.profiles is not None and self.prompts is not None and not self.problems


def load_setup(profiles_file: Path | None, prompts_dir: Path) -> RouterSetup:
    problems: list[str] = []
    profiles: Profiles | None = None
    prompts: PromptSet | None = None
    if profiles_file is None:
        problems.append("no model profiles file is configured (TOOLLOOP_PROFILES)")
    else:
        try:
            profiles = load_profiles(profiles_file)
        except ProfilesError as exc:
            problems.extend(str(problem) for problem in exc.problems)
    try:
        prompts = load_prompts(prompts_dir)
    except PromptError as exc:
        problems.extend(exc.problems)
    if problems:
        return RouterSetup(None, prompts, tuple(problems))
    return RouterSetup(profiles, prompts, ())


def model_client(
    http: httpx.AsyncClient,
    *,
    max_attempts: int,
    backoff_s: float,
    backoff_max_s: float,
    retry_after_max_s: float,
) -> LLMClient:
    return LLMClient(
        http,
        max_attempts=max_attempts,
        backoff_s=backoff_s,
        backoff_max_s=backoff_max_s,
        retry_after_max_s=retry_after_max_s,
    )
