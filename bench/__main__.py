"""`python -m bench`: every benchmark, one after another; `BENCH_QUICK=1` for a short run,
`BENCH_ONLY=name,name` for some of them. Results go to bench/results/."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from app.api.collector import tune_for_serving
from bench import harness, peers
from bench.stats import Section

RESULTS = Path(__file__).with_name("results")


def _sections() -> dict[str, Callable[[], Awaitable[Section]]]:
    from bench import (
        cache,
        http,
        overhead,
        parallel,
        receipts,
        router,
        scale,
        temporal,
        tracing,
        workers,
    )

    return {
        "overhead": overhead.measure,
        "receipts": receipts.measure,
        "parallel": parallel.measure,
        "cache": cache.measure,
        "router": router.measure,
        "scale": scale.measure,
        "http": http.measure,
        "tracing": tracing.measure,
        "workers": workers.measure,
        "temporal": temporal.measure,
    }


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
        "quick": str(harness.QUICK),
        "collector": "as a server's (app.api.collector.tune_for_serving)",
    }


def _summary(about: dict[str, str], results: list[dict[str, Any]]) -> str:
    lines = [
        f"Run of {about['date']} on {about['nproc']} x {about['cpu']}, Python {about['python']}"
        f" (commit {about['commit'] or '?'}, quick={about['quick']}).",
        "",
        "| target | figure (median, min-max) | bound | verdict |",
        "|---|---|---|---|",
    ]
    for section in results:
        for check in section["checks"]:
            verdict = {True: "met", False: "**missed**", None: "reference"}[check["met"]]
            lines.append(
                f"| {check['target']} | {check['figure']} | {check['bound']} | {verdict} |"
            )
    return "\n".join(lines) + "\n"


async def main() -> int:
    chosen = [name for name in os.environ.get("BENCH_ONLY", "").split(",") if name]
    sections = _sections()
    unknown = [name for name in chosen if name not in sections]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(sections)}")
        return 2
    # The collector as `toolloop serve` sets it, once everything is imported (the
    # peers' packages too): every in-process figure, ours and the peers', is taken
    # under the same settings.
    peers.import_peers()
    tune_for_serving()
    about = machine()
    print("# ToolLoop benchmarks", json.dumps(about), sep="\n", flush=True)
    results = []
    for name, measure in sections.items():
        if chosen and name not in chosen:
            continue
        section = await measure()
        print(section.render(), "", sep="\n", flush=True)
        results.append(section.to_dict())
    summary = _summary(about, results)
    print(summary)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.md").write_text(summary)
    stamp = about["date"].replace(":", "")
    document = json.dumps({"machine": about, "sections": results}, indent=2)
    (RESULTS / f"run-{stamp}.json").write_text(document)
    (RESULTS / "latest.json").write_text(document)
    print(f"results: {RESULTS / 'latest.json'}")
    return 0


def run_until_terminated(run: Coroutine[Any, Any, int]) -> int:
    """`asyncio.run(run)`, with SIGTERM (what `make bench`'s `timeout` sends) taken as
    a cancellation: the run's `finally` blocks stop its servers and drop its scratch
    databases before the process ends (Python's default for SIGTERM skips them)."""

    async def cancellable() -> int:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            return await run
        except asyncio.CancelledError:
            print("benchmarks stopped by SIGTERM; no results written", file=sys.stderr)
            return 128 + signal.SIGTERM

    return asyncio.run(cancellable())


if __name__ == "__main__":
    sys.exit(run_until_terminated(main()))
