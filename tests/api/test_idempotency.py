from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import create_key
from app.service.errors import StorageUnavailable
from app.service.idempotency import IdempotencyClaim, IdempotencyService
from app.service.plans import service as plan_service
from app.settings import Settings
from tests.api import run_tools
from tests.api.run_registry import REGISTRY, echo, gate, parallel, sequential
from tests.api.run_support import run_count
from tests.support.app import AppFactory, stored_run
from tests.support.waiting import wait_for

SECRET = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    run_tools.reset()
    yield
    run_tools.reset()


@pytest.fixture
def settings(make_app: AppFactory) -> Settings:
    return make_app.settings(REGISTRY)


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


async def test_a_retry_replays_the_stored_response_without_running_anything(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(echo("1", "one"), echo("2", "two"))
    first = await client.post("/plans/sequential", json=plan, headers=key("k-1"))
    again = await client.post("/plans/sequential", json=plan, headers=key("k-1"))

    assert first.status_code == again.status_code == 200
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["content-type"] == "application/json"
    assert again.json() == first.json()
    assert run_tools.echoed == ["one", "two"]
    assert await run_count(app) == 1
    run = await stored_run(app, first.json()["plan_id"])
    assert run.request_digest is not None


async def test_the_same_body_in_another_key_order_is_the_same_request(
    client: httpx.AsyncClient,
) -> None:
    headers = {**key("k"), "content-type": "application/json"}
    call = b'{"call_key": "1", "tool": "echo", "args": {"text": "a"}}'
    reordered = b'{"args": {"text": "a"}, "tool": "echo", "call_key": "1"}'
    first = await client.post(
        "/plans/sequential",
        content=b'{"owner": "runner", "calls": [' + call + b"]}",
        headers=headers,
    )
    again = await client.post(
        "/plans/sequential",
        content=b'{"calls": [' + reordered + b'], "owner": "runner"}',
        headers=headers,
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()


async def test_a_replay_returns_the_stored_redacted_copy(client: httpx.AsyncClient) -> None:
    plan = sequential(echo("1", SECRET))
    first = await client.post("/plans/sequential", json=plan, headers=key("secret"))
    again = await client.post("/plans/sequential", json=plan, headers=key("secret"))

    assert first.json()["receipts"][0]["output"] == {"text": SECRET}
    replayed = again.json()["receipts"][0]
    assert "abcdefghijklmnopqrstuvwxyz0123456789" not in again.text
    assert replayed["output"] == {"text": "Bearer [REDACTED]"}
    assert replayed["receipt_id"] == first.json()["receipts"][0]["receipt_id"]
    assert set(replayed) == set(first.json()["receipts"][0])


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        pytest.param("/plans/sequential", sequential(echo("1", "other")), {}, id="other-body"),
        pytest.param("/plans/parallel", parallel({"a": [echo("1", "one")]}), {}, id="other-path"),
        pytest.param(
            "/plans/sequential",
            sequential(echo("1", "one")),
            {"Prefer": "respond-async"},
            id="other-response-mode",
        ),
    ],
)
async def test_the_same_key_for_a_different_request_is_422(
    app: FastAPI,
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, object],
    headers: dict[str, str],
) -> None:
    first = await client.post(
        "/plans/sequential", json=sequential(echo("1", "one")), headers=key("k")
    )
    assert first.status_code == 200

    reused = await client.post(path, json=body, headers={**key("k"), **headers})

    assert reused.status_code == 422
    assert reused.headers["content-type"] == "application/problem+json"
    assert reused.json()["type"] == "urn:toolloop:problem:idempotency-key-reused"
    assert "idempotent-replayed" not in reused.headers
    assert run_tools.echoed == ["one"]
    assert await run_count(app) == 1


async def test_the_same_key_while_the_first_request_runs_is_409(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(gate("1", "slow"))
    first = asyncio.create_task(client.post("/plans/sequential", json=plan, headers=key("k")))
    await wait_for(lambda: run_tools.entered["slow"] == 1)

    busy = await client.post("/plans/sequential", json=plan, headers=key("k"))
    assert busy.status_code == 409
    assert busy.json()["type"] == "urn:toolloop:problem:idempotency-key-in-use"
    assert busy.headers["retry-after"] == "1"

    run_tools.release("slow")
    done = await first
    assert done.status_code == 200
    later = await client.post("/plans/sequential", json=plan, headers=key("k"))
    assert later.headers["idempotent-replayed"] == "true"
    assert later.json() == done.json()
    assert run_tools.entered["slow"] == 1
    assert await run_count(app) == 1


async def test_concurrent_duplicates_create_exactly_one_run(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(gate("1", "slow"))
    posts = [
        asyncio.create_task(client.post("/plans/sequential", json=plan, headers=key("k")))
        for _ in range(6)
    ]
    await wait_for(lambda: run_tools.entered["slow"] == 1 and sum(p.done() for p in posts) == 5)
    run_tools.release("slow")
    responses = await asyncio.gather(*posts)

    assert sorted(r.status_code for r in responses) == [200, 409, 409, 409, 409, 409]
    assert run_tools.entered["slow"] == 1
    assert await run_count(app) == 1


async def test_concurrent_duplicates_of_a_quick_plan_create_exactly_one_run(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(echo("1", "quick"))
    responses = await asyncio.gather(
        *(client.post("/plans/sequential", json=plan, headers=key("k")) for _ in range(8))
    )

    fresh = [r for r in responses if "idempotent-replayed" not in r.headers]
    replays = [r for r in responses if "idempotent-replayed" in r.headers]
    (ran,) = [r for r in fresh if r.status_code == 200]
    assert all(r.status_code == 409 for r in fresh if r is not ran)
    assert all(r.json() == ran.json() for r in replays)
    assert run_tools.echoed == ["quick"]
    assert await run_count(app) == 1


async def test_a_preflight_rejection_is_stored_and_replayed(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(echo("1", "ok"), {"call_key": "2", "tool": "ghost", "args": {}})
    first = await client.post("/plans/sequential", json=plan, headers=key("bad"))
    again = await client.post("/plans/sequential", json=plan, headers=key("bad"))

    assert first.status_code == again.status_code == 422
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["content-type"] == "application/problem+json"
    assert again.json() == first.json()
    assert run_tools.echoed == []
    assert await run_count(app) == 0


async def test_a_server_error_before_the_run_stores_nothing(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = plan_service.record_run_start
    failures = iter([StorageUnavailable("the database is away")])

    async def flaky(*args: object, **kwargs: object) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plan_service, "record_run_start", flaky)
    plan = sequential(echo("1", "x"))
    failed = await client.post("/plans/sequential", json=plan, headers=key("k"))
    retried = await client.post("/plans/sequential", json=plan, headers=key("k"))

    assert failed.status_code == 503
    assert retried.status_code == 200
    assert "idempotent-replayed" not in retried.headers
    assert await run_count(app) == 1


async def test_an_async_start_stores_the_202_with_its_location(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    plan = sequential(gate("1", "slow"))
    headers = {**key("k"), "Prefer": "respond-async"}
    first = await client.post("/plans/sequential", json=plan, headers=headers)
    again = await client.post("/plans/sequential", json=plan, headers=headers)
    run_tools.release("slow")

    assert first.status_code == again.status_code == 202
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert again.json() == first.json() == {"run_id": first.json()["run_id"], "status": "running"}
    assert await run_count(app) == 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param('""', id="empty"),
        pytest.param("x" * 256, id="too-long"),
        pytest.param("caf\u00e9", id="not-ascii"),
    ],
)
async def test_an_invalid_key_is_422(client: httpx.AsyncClient, value: str) -> None:
    response = await client.post(
        "/plans/sequential",
        json=sequential(echo("1")),
        headers=[(b"Idempotency-Key", value.encode())],
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["pointer"] == "/idempotency-key"
    assert run_tools.echoed == []


async def test_a_quoted_key_is_the_same_key_as_a_bare_one(client: httpx.AsyncClient) -> None:
    plan = sequential(echo("1"))
    await client.post("/plans/sequential", json=plan, headers=key('"abc"'))
    again = await client.post("/plans/sequential", json=plan, headers=key("abc"))
    assert again.headers["idempotent-replayed"] == "true"


class TestKeysAreScopedToTheCaller:
    @pytest.fixture
    def keys_file(self, tmp_path: Path) -> Path:
        return tmp_path / "keys.yml"

    @pytest.fixture
    def alice(self, keys_file: Path) -> str:
        return create_key(keys_file, "alice", ["plans:execute"])

    @pytest.fixture
    def bob(self, keys_file: Path) -> str:
        return create_key(keys_file, "bob", ["plans:execute"])

    @pytest.fixture
    def settings(self, make_app: AppFactory, keys_file: Path, alice: str, bob: str) -> Settings:
        return make_app.settings(REGISTRY, api_keys=keys_file)

    async def test_another_caller_with_the_same_key_starts_its_own_run(
        self, app: FastAPI, client: httpx.AsyncClient, alice: str, bob: str
    ) -> None:
        plan = sequential(echo("1", "shared"))

        def auth(token: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {token}", **key("same")}

        first = await client.post("/plans/sequential", json=plan, headers=auth(alice))
        other = await client.post("/plans/sequential", json=plan, headers=auth(bob))
        again = await client.post("/plans/sequential", json=plan, headers=auth(alice))

        assert [first.status_code, other.status_code, again.status_code] == [200, 200, 200]
        assert "idempotent-replayed" not in other.headers
        assert other.json()["plan_id"] != first.json()["plan_id"]
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["plan_id"] == first.json()["plan_id"]
        assert await run_count(app) == 2


@pytest.mark.parametrize("kind", ["sequential", "parallel"])
async def test_a_waited_for_answer_is_stored_with_the_run_s_end(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # Stored in the transaction of the run's end: not by a write after it.
    async def not_after_the_end(*_args: object) -> None:
        raise AssertionError("the answer was stored after the run's end")

    monkeypatch.setattr(IdempotencyService, "complete", not_after_the_end)
    plan = sequential(echo("1", "one")) if kind == "sequential" else parallel({"a": [echo("1")]})
    first = await client.post(f"/plans/{kind}", json=plan, headers=key("k"))
    again = await client.post(f"/plans/{kind}", json=plan, headers=key("k"))

    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert await run_count(app) == 1


async def test_a_new_key_is_claimed_without_reading_it_first(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    lookup = IdempotencyService.lookup

    async def counted(self: IdempotencyService, claim: IdempotencyClaim) -> object:
        reads.append(claim.key)
        return await lookup(self, claim)

    monkeypatch.setattr(IdempotencyService, "lookup", counted)
    plan = sequential(echo("1", "one"))
    first = await client.post("/plans/sequential", json=plan, headers=key("k"))
    assert first.status_code == 200
    assert reads == []
    # A retry finds the key held by the first request's run: it reads the stored answer.
    again = await client.post("/plans/sequential", json=plan, headers=key("k"))
    assert again.headers["idempotent-replayed"] == "true"
    assert reads == ["k"]
    assert run_tools.echoed == ["one"]


async def test_a_retry_is_replayed_even_when_no_new_run_could_start(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim is tried first: when starting a run fails with a server error, the
    # key is still read, and a request that ended earlier gets its stored answer.
    plan = sequential(echo("1", "one"))
    first = await client.post("/plans/sequential", json=plan, headers=key("k"))

    async def away(*_args: object, **_kwargs: object) -> None:
        raise StorageUnavailable("the database is away")

    monkeypatch.setattr(plan_service, "record_run_start", away)
    again = await client.post("/plans/sequential", json=plan, headers=key("k"))
    other = await client.post("/plans/sequential", json=plan, headers=key("other"))

    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert other.status_code == 503  # a new key: nothing stored to answer with
    assert run_tools.echoed == ["one"]


async def test_a_key_whose_answer_was_lost_is_unanswered_once_its_run_is_gone(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cancelled run's answer is stored by its task after its end; here that write
    # fails, so the key stays in progress with nobody left to answer it.
    async def lost(*_args: object) -> None:
        raise StorageUnavailable("the answer could not be stored")

    monkeypatch.setattr(IdempotencyService, "complete", lost)
    plan = sequential(gate("1", "g"))
    waiting = asyncio.create_task(client.post("/plans/sequential", json=plan, headers=key("k")))
    await wait_for(lambda: run_tools.entered["g"] == 1)
    busy = await client.post("/plans/sequential", json=plan, headers=key("k"))
    (run,) = (await client.get("/runs")).json()["items"]
    assert (await client.post(f"/runs/{run['run_id']}/cancel")).status_code == 200
    first = await waiting
    again = await client.post("/plans/sequential", json=plan, headers=key("k"))

    assert busy.status_code == 409
    assert busy.json()["type"] == "urn:toolloop:problem:idempotency-key-in-use"
    assert busy.headers["retry-after"] == "1"
    assert first.status_code == 200
    assert first.json()["status"] == "cancelled"
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"
    assert again.json()["type"] == "urn:toolloop:problem:idempotency-key-unanswered"
    assert f"run {run['run_id']}, which stopped (cancelled)" in again.json()["detail"]
    assert again.json()["run_id"] == run["run_id"]
    assert again.json()["run_status"] == "cancelled"
    assert "retry-after" not in again.headers
    assert await run_count(app) == 1
