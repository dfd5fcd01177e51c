"""`python -m bench.memory_probe LANES`: memory of one parallel plan, in a fresh process.

Prints one JSON line: RSS when idle (engine built and warmed), after the plan
and its admitted arguments exist, and the peak while it runs (VmHWM, reset
just before). The plan's calls are no-ops at max_concurrency 100.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from pathlib import Path

from bench import harness


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


async def main(lanes: int) -> dict[str, float | bool]:
    built = harness.contract()
    runner = harness.engine(built)
    warm, warm_args = harness.parallel_plan(built, "noop", 100, 100)
    await harness.run_parallel(runner, built, warm, warm_args)
    gc.collect()
    idle = _status_kb("VmRSS")
    plan, admitted = harness.parallel_plan(built, "noop", lanes, 100)
    gc.collect()
    with_plan = _status_kb("VmRSS")
    reset = _reset_peak()
    outcome = await harness.run_parallel(runner, built, plan, admitted)
    peak = _status_kb("VmHWM")
    assert len(outcome.lanes) == lanes
    await runner.aclose()
    return {
        "lanes": lanes,
        "idle_mb": idle / 1024,
        "with_plan_mb": with_plan / 1024,
        "peak_mb": peak / 1024,
        "peak_reset": reset,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1])))))
