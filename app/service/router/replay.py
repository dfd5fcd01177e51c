"""Replaying a recorded router run: today's registry, guardrails, verifiers and
prompts against the model replies a run recorded, and where the decisions differ.

The source is a recorded run (its id) or a cassette file (`router.cassette`).
The replay is a router run like any other (recorded, audited, its tools run
through the engine); only its model is the recording (`app.llm.replay`), served
through the same client interface. Its outcome gains `replay`:

    {"source": "cassette tour.cassette.jsonl" | "run <id>",
     "recorded_run_id": "...", "same_request": bool, "same_contract": bool,
     "replies": {"recorded": N, "asked": M},
     "matches": bool, "differences": [{kind, call_key, recorded, replayed, message}],
     "paused_at": [call keys]}

with the differences named in `router.trail`. `paused_at` holds the calls the
replay paused at for confirmation where the recording asked a person too: the
replay ends there (its recording is served once, it does not resume), and the
recording is compared up to that pause.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.llm.profiles import ModelProfile
from app.llm.replay import ReplayModel
from app.router.loop import RouterRun, RunResult
from app.router.ports import DecisionSink
from app.router.request_checks import RunPlan
from app.service.router.cassette import CassetteError, Recording, read_cassette
from app.service.router.recorded import RecordingUnavailable, load_recording, recorded_request
from app.service.router.tasks import Review
from app.service.router.trail import Event, differences, trail_of, until_same_pause

# The decision events a trail is made of (`router.trail`).
_KEPT = frozenset(
    {
        "router.call_admitted",
        "router.call_rejected",
        "router.call_denied",
        "router.confirmation_requested",
        "router.final_checked",
        "router.completion_checked",
    }
)
_PROFILE_FIELDS = ("router_profile", "final_profile")


class ReplaySourceError(ValueError):
    """The recording cannot be replayed; the message names the problem."""


class CapturedDecisions:
    """A `DecisionSink` that keeps the decision events it forwards."""

    __slots__ = ("events", "inner")

    def __init__(self, inner: DecisionSink) -> None:
        self.inner = inner
        self.events: list[Event] = []

    def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        tool: str | None = None,
        call_key: str | None = None,
    ) -> None:
        if kind in _KEPT:
            self.events.append(Event(kind, dict(detail), tool, call_key))
        self.inner.record(kind, detail, tool=tool, call_key=call_key)


async def recording_for(
    profile: ModelProfile, sessions: async_sessionmaker[AsyncSession]
) -> Recording:
    """The recording a replay profile names; ReplaySourceError says why there is none."""
    source = profile.cassette if profile.cassette is not None else profile.replay_run
    assert source is not None
    return await recording_from(source, sessions)


async def recording_from(
    source: Path | str, sessions: async_sessionmaker[AsyncSession]
) -> Recording:
    """A cassette file's recording, or a recorded run's (by its id)."""
    try:
        if isinstance(source, Path):
            return await asyncio.to_thread(read_cassette, source)
        return await load_recording(sessions, source)
    except (CassetteError, RecordingUnavailable) as exc:
        raise ReplaySourceError(str(exc)) from None


def replay_profile(name: str, source: str) -> ModelProfile:
    return ModelProfile(name=name, provider="replay", base_url="", model=f"replay of {source}")


def replayed_request(recording: Recording, profile: str) -> dict[str, Any]:
    """The recorded request, both of its models now `profile`."""
    return {**recording.request, **dict.fromkeys(_PROFILE_FIELDS, profile)}


@dataclass(frozen=True, slots=True)
class Replay:
    recording: Recording
    model: ReplayModel
    decisions: CapturedDecisions
    contract_hash: str

    def review(self) -> Review:
        def reviewed(run: RouterRun, result: RunResult) -> RunResult:
            report = self.report(run, result)
            outcome = replace(result.outcome, replay=report)
            return replace(result, outcome=outcome, stored={**result.stored, "replay": report})

        return reviewed

    def report(self, run: RouterRun, result: RunResult) -> dict[str, Any]:
        recording, outcome = self.recording, result.outcome
        replayed = trail_of(
            self.decisions.events,
            result.stored["receipts"],
            {
                "status": outcome.status.value,
                "stopped_by": outcome.stopped_by,
                "turns": outcome.turns,
                "attempts": outcome.attempts,
            },
            run.session.replies,
        )
        # The replies the recording holds are what was served, whatever its header says.
        served = replace(recording.recorded, roles=[entry.role for entry in recording.entries])
        served, paused_at = until_same_pause(served, replayed)
        found = differences(served, replayed)
        return {
            "source": recording.source,
            "recorded_run_id": recording.run_id,
            "same_request": _same_request(recording.request, run.plan, run),
            "same_contract": recording.contract_hash == self.contract_hash,
            "replies": {"recorded": len(recording.entries), "asked": self.model.asked},
            "matches": not found,
            "differences": found,
            "paused_at": paused_at,
        }


def _same_request(recorded: Mapping[str, Any], plan: RunPlan, run: RouterRun) -> bool:
    now = recorded_request(plan, run.kit.redactors)
    return {k: v for k, v in recorded.items() if k not in _PROFILE_FIELDS} == {
        k: v for k, v in now.items() if k not in _PROFILE_FIELDS
    }
