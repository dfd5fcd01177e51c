"""The bare Temporal floor: the benchmark's no-op tool as a plain activity, two plain
workflows over it, and a plain worker process for them.

`python -m bench.temporal_bare ADDRESS NAMESPACE TASK_QUEUE` runs one worker with the
SDK's defaults until SIGTERM. Nothing of ToolLoop is imported here: this is what the
same activities cost on Temporal alone.
"""

from __future__ import annotations

import asyncio
import datetime
import signal
import sys
from collections.abc import Sequence

from temporalio import activity, workflow

CALL_TIMEOUT = datetime.timedelta(seconds=60)


@activity.defn
async def noop(text: str) -> dict[str, str]:
    return {"text": text}


@workflow.defn
class SequentialCalls:
    """`calls` activities one after another, as a sequential plan's calls run."""

    @workflow.run
    async def run(self, calls: int) -> int:
        for _ in range(calls):
            answer = await workflow.execute_activity(
                noop, "hello", start_to_close_timeout=CALL_TIMEOUT
            )
            assert answer == {"text": "hello"}
        return calls


@workflow.defn
class FanOut:
    """`lanes` activities at once, as a parallel plan of one-call lanes runs."""

    @workflow.run
    async def run(self, lanes: int) -> int:
        answers = await asyncio.gather(
            *(
                workflow.execute_activity(noop, "hello", start_to_close_timeout=CALL_TIMEOUT)
                for _ in range(lanes)
            )
        )
        assert all(answer == {"text": "hello"} for answer in answers)
        return len(answers)


async def serve(address: str, namespace: str, task_queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    # By module name: run as `__main__`, this file's classes would carry a module name
    # the workflow sandbox cannot import again.
    from bench.temporal_bare import FanOut, SequentialCalls, noop

    client = await Client.connect(address, namespace=namespace)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    workflows = [SequentialCalls, FanOut]
    async with Worker(client, task_queue=task_queue, workflows=workflows, activities=[noop]):
        await stopping.wait()


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m bench.temporal_bare ADDRESS NAMESPACE TASK_QUEUE")
        return 2
    asyncio.run(serve(*argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
