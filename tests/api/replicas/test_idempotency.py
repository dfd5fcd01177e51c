"""One Idempotency-Key sent to both replicas at once: one run; the duplicate is told the
first request is in progress (409), and every retry after the end replays its answer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.api.replicas.tools import call, calls, sequential
from tests.support.replicas import replicas
from tests.support.waiting import wait_for_sync

pytestmark = pytest.mark.postgres
KEY = {"Idempotency-Key": "one-run"}


def test_one_key_sent_to_both_replicas_at_once_runs_once(
    tmp_path: Path, env: dict[str, str]
) -> None:
    plan = sequential(call("held", "gated"))
    with replicas(tmp_path, 2, env) as (a, b), ThreadPoolExecutor(2) as pool:

        def send(base: str) -> httpx.Response:
            return httpx.post(f"{base}/plans/sequential", json=plan, headers=KEY, timeout=60)

        sent = [pool.submit(send, base) for base in (a.base, b.base)]
        wait_for_sync(lambda: any(f.done() for f in sent), "the duplicate was answered")
        (tmp_path / "held").touch()
        first, second = (future.result() for future in sent)
        retries = [send(base) for base in (a.base, b.base)]

    answered, duplicate = (first, second) if first.status_code == 200 else (second, first)
    assert (answered.status_code, duplicate.status_code) == (200, 409), (first.text, second.text)
    assert duplicate.json()["type"] == "urn:toolloop:problem:idempotency-key-in-use"
    assert calls(tmp_path) == ["held"]
    for retry in retries:
        assert retry.status_code == 200
        assert retry.headers["idempotent-replayed"] == "true"
        assert retry.json() == answered.json()
