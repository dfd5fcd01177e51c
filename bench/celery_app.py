"""The Celery peer: the same no-op tool as a task, over Redis on 127.0.0.1."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

BROKER = os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/15")
QUEUE = "toolloop-bench"

app = Celery("toolloop_bench", broker=BROKER, backend=BROKER)
app.conf.update(
    task_default_queue=QUEUE,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    result_expires=60,
)


@app.task(name="bench.noop")  # type: ignore[untyped-decorator]
def noop(text: str) -> dict[str, Any]:
    return {"text": text}
