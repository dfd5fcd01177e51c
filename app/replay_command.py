"""`toolloop router replay SOURCE`: a recorded router run replayed in this process.

SOURCE is a recorded run's id, or a cassette file (an existing path). The
replay runs against today's registries, guardrails, verifiers and prompts,
records itself as a new router run in the database, and prints its outcome
(without the receipts' outputs) and its `replay` report as JSON on stdout.
`--save-cassette PATH` writes the run's cassette instead and replays nothing.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from app.contract import Contract
from app.service.errors import RouterRequestRejected, RouterUnavailable, StorageUnavailable
from app.service.router.cassette import cassette_text
from app.service.router.recorded import RecordingUnavailable, load_recording
from app.service.router.replay import ReplaySourceError
from app.service.runtime import open_runtime
from app.settings import Settings
from app.store.database import create_database_engine, create_session_factory
from app.store.migrate import upgrade_database

REPLAYED = 0
FAILED = 1
# The replay ran, and some decision differs from the recording's.
DIFFERS = 4

_SHOWN = ("run_id", "status", "stopped_by", "text", "final", "attempts", "turns", "replay")


def source_of(argument: str) -> str | Path:
    path = Path(argument)
    return path if path.is_file() else argument


async def replay(settings: Settings, contract: Contract, argument: str) -> tuple[int, str]:
    """(exit status, what to print: the JSON answer, or the problem)."""
    runtime = await open_runtime(settings, contract)
    try:
        task = await runtime.router.open_replay(source_of(argument), None)
        result = await runtime.runs.launch(task).wait()
    except RouterRequestRejected as exc:
        listed = "; ".join(f"{p.pointer}: {p.message}" for p in exc.problems)
        return FAILED, f"the recorded request does not pass today's admission: {listed}"
    except (ReplaySourceError, RouterUnavailable, StorageUnavailable) as exc:
        return FAILED, str(exc)
    finally:
        await runtime.aclose()
    shown: dict[str, Any] = {key: result.response.get(key) for key in _SHOWN}
    report = shown["replay"]
    status = REPLAYED if report is not None and report["matches"] else DIFFERS
    return status, json.dumps(shown, indent=2, ensure_ascii=False)


async def save_cassette(settings: Settings, run_id: str, path: Path) -> tuple[int, str]:
    try:
        text, replies = await _cassette_of(settings, run_id)
    except (RecordingUnavailable, StorageUnavailable) as exc:
        return FAILED, str(exc)
    try:
        await asyncio.to_thread(path.write_text, text, encoding="utf-8")
    except OSError as exc:
        return FAILED, f"cannot write {path}: {exc.strerror or type(exc).__name__}"
    return REPLAYED, f"wrote {path}: the request, the decisions and {replies} replies of {run_id}"


async def _cassette_of(settings: Settings, run_id: str) -> tuple[str, int]:
    await upgrade_database(settings.database_url)
    engine = create_database_engine(settings.database_url)
    try:
        recording = await load_recording(create_session_factory(engine), run_id)
    finally:
        await engine.dispose()
    return cassette_text(recording), len(recording.replies)


def print_result(status: int, text: str, *, to_stdout: bool) -> int:
    if status == FAILED or not to_stdout:
        print(f"toolloop: {text}" if status == FAILED else text, file=sys.stderr)
    else:
        print(text)
    return status
