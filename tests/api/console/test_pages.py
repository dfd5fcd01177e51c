"""The console's pages over HTTP, on both databases: what they show, what they refuse,
and that every stored value they show is the redacted copy."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from tests.api.console import console_tools
from tests.api.console.console_registry import REGISTRY, call
from tests.support.app import AppFactory
from tests.support.waiting import wait_for

SECRET = "hunter2-console-secret"


def csrf_token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


async def run_plan(client: httpx.AsyncClient, *calls: dict[str, object], **headers: str) -> str:
    response = await client.post(
        "/plans/sequential", json={"owner": "desk", "calls": list(calls)}, headers=headers
    )
    assert response.status_code in (200, 202), response.text
    body = response.json()
    return str(body.get("plan_id") or body["run_id"])


async def test_open_mode_shows_runs_a_run_and_its_timeline(
    open_console: httpx.AsyncClient,
) -> None:
    run_id = await run_plan(
        open_console,
        call("a", "echo", text="hello", secret=SECRET),
        call("b", "fail", text="boom"),
        call("c", "echo", text="never"),
    )

    home = await open_console.get("/console")
    runs = await open_console.get("/console/runs")
    run = await open_console.get(f"/console/runs/{run_id}")

    assert home.status_code == 303
    assert home.headers["location"] == "/console/runs"
    assert runs.status_code == 200
    assert f"/console/runs/{run_id}" in runs.text
    assert run.status_code == 200
    page = run.text
    assert "<svg" in page
    assert page.count('class="bar status-') == 3
    assert "status-failed" in page
    assert "status-skipped" in page
    assert "refused 4 characters" in page
    assert "call.finished" in page  # the audit trail is shown
    assert SECRET not in page
    assert SECRET not in runs.text


async def test_pages_carry_a_strict_session_cookie_and_a_content_policy(
    open_console: httpx.AsyncClient,
) -> None:
    page = await open_console.get("/console/runs")

    cookie = page.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/console" in cookie
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert re.findall(r'(?:src|href)="(https?:)?//', page.text) == []


async def test_filters_page_through_the_same_reads_as_the_api(
    open_console: httpx.AsyncClient,
) -> None:
    first = await run_plan(open_console, call("a", "echo", text="one"))
    await run_plan(open_console, call("a", "fail", text="two"))

    failed = await open_console.get("/console/runs", params={"status": "failed"})
    receipts = await open_console.get("/console/receipts", params={"tool": "echo"})
    bad = await open_console.get("/console/runs", params={"since": "2026-12-01", "kind": "nope"})

    assert first not in failed.text
    assert failed.text.count("/console/runs/") == 1
    assert "echo" in receipts.text
    assert "refused" not in receipts.text
    assert bad.status_code == 422
    assert "since: must be an RFC 3339 time" in bad.text
    assert "kind: must be one of" in bad.text


async def test_cancelling_needs_the_sessions_token(open_console: httpx.AsyncClient) -> None:
    run_id = await run_plan(open_console, call("h", "hold", label="held"), Prefer="respond-async")
    page = await open_console.get(f"/console/runs/{run_id}")
    assert "Cancel run" in page.text

    forged = await open_console.post(
        f"/console/runs/{run_id}/cancel", data={"csrf_token": "not-the-token"}
    )
    still = (await open_console.get(f"/runs/{run_id}")).json()["status"]
    cancelled = await open_console.post(
        f"/console/runs/{run_id}/cancel", data={"csrf_token": csrf_token(page.text)}
    )

    assert forged.status_code == 403
    assert still == "running"
    assert cancelled.status_code == 303
    assert cancelled.headers["location"] == f"/console/runs/{run_id}?done=cancelled"
    assert (await open_console.get(f"/runs/{run_id}")).json()["status"] == "cancelled"


async def test_the_tools_page_shows_each_tools_health(open_console: httpx.AsyncClient) -> None:
    for text in ("a", "b", "c"):
        await run_plan(open_console, call("e", "echo", text=text))
    await run_plan(open_console, call("f", "fail", text="x"))

    page = await open_console.get("/console/tools")

    assert page.status_code == 200
    echo = page.text[page.text.index('id="tool-echo"') : page.text.index('id="tool-hold"')]
    assert "<td>3</td><td>0.0 %</td>" in echo
    failing = page.text[page.text.index('id="tool-fail"') :]
    assert "<td>1</td><td>100.0 %</td>" in failing
    assert 'class="spark"' in echo


async def test_with_keys_a_page_asks_to_sign_in_and_shows_only_the_callers_runs(
    make_app: AppFactory, keys: tuple[Path, dict[str, str]]
) -> None:
    path, secrets = keys
    async with make_app(REGISTRY, api_keys=path) as (_, client):
        theirs = await run_plan(
            client, call("a", "echo", text="x"), Authorization=f"Bearer {secrets['other']}"
        )
        mine = await run_plan(
            client, call("a", "echo", text="y"), Authorization=f"Bearer {secrets['worker']}"
        )

        unsigned = await client.get("/console/runs")
        form = await client.get("/console/sign-in?next=/console/runs")
        wrong = await client.post(
            "/console/sign-in",
            data={"csrf_token": csrf_token(form.text), "api_key": "tl_nope", "next": "/x"},
        )
        form = await client.get("/console/sign-in")
        signed = await client.post(
            "/console/sign-in",
            data={
                "csrf_token": csrf_token(form.text),
                "api_key": secrets["worker"],
                "next": "https://elsewhere.example/",
            },
        )
        listing = await client.get("/console/runs")
        other = await client.get(f"/console/runs/{theirs}")
        own = await client.get(f"/console/runs/{mine}")
        sign_out = await client.post("/console/sign-out", data={"csrf_token": csrf_token(own.text)})
        after = await client.get("/console/runs")

    assert unsigned.status_code == 303
    assert unsigned.headers["location"].startswith("/console/sign-in")
    assert wrong.status_code == 401
    assert "not valid" in wrong.text
    assert signed.status_code == 303
    assert signed.headers["location"] == "/console/runs"  # never to another site
    assert mine in listing.text
    assert theirs not in listing.text
    assert other.status_code == 404
    assert own.status_code == 200
    assert secrets["worker"] not in own.text
    assert sign_out.status_code == 303
    assert after.status_code == 303


async def test_a_sign_in_form_posted_from_elsewhere_is_refused(
    make_app: AppFactory, keys: tuple[Path, dict[str, str]]
) -> None:
    path, secrets = keys
    async with make_app(REGISTRY, api_keys=path) as (_, client):
        forged = await client.post(
            "/console/sign-in", data={"csrf_token": "guessed", "api_key": secrets["worker"]}
        )
    assert forged.status_code == 401
    assert "toolloop_console=" not in forged.headers.get("set-cookie", "")


async def test_a_key_without_runs_read_sees_a_403_page(
    make_app: AppFactory, keys: tuple[Path, dict[str, str]]
) -> None:
    path, secrets = keys
    async with make_app(REGISTRY, api_keys=path) as (_, client):
        form = await client.get("/console/sign-in")
        await client.post(
            "/console/sign-in",
            data={"csrf_token": csrf_token(form.text), "api_key": secrets["metrics"]},
        )
        page = await client.get("/console/runs")
    assert page.status_code == 403
    assert "runs:read" in page.text


async def test_a_running_plan_streams_its_receipts_to_the_console(
    open_console: httpx.AsyncClient,
) -> None:
    run_id = await run_plan(
        open_console,
        call("a", "echo", text="first"),
        call("h", "hold", label="go"),
        Prefer="respond-async",
    )
    page = await open_console.get(f"/console/runs/{run_id}")
    assert f'data-events="/console/runs/{run_id}/events"' in page.text

    async def receipts() -> list[Any]:
        items: list[Any] = (await open_console.get(f"/runs/{run_id}/receipts")).json()["items"]
        return items

    async def release_after_the_first_receipt() -> None:
        await wait_for(receipts, "the first receipt")
        console_tools.release("go")

    # httpx's ASGI transport hands over a streamed body once it is complete: the stream
    # is read whole after the run ended, which the release above lets it do.
    releasing = asyncio.create_task(release_after_the_first_receipt())
    events = (await open_console.get(f"/console/runs/{run_id}/events")).text
    await releasing

    assert events.count("event: receipt") == 2
    assert '"status":"succeeded"' in events.split("event: end")[1]


async def test_a_waiting_call_is_approved_or_rejected_from_the_console(
    open_console: httpx.AsyncClient,
) -> None:
    approved_run = await run_plan(
        open_console, call("a", "echo", text="x"), call("p", "pay", text="10", secret=SECRET)
    )
    rejected_run = await run_plan(
        open_console, call("p", "pay", text="20"), call("z", "echo", text="z")
    )

    page = await open_console.get("/console/confirmations")
    assert page.status_code == 200
    assert SECRET not in page.text
    forms = dict(re.findall(r'action="/console/runs/([^/"]+)/confirmations/([^"]+)"', page.text))
    assert set(forms) == {approved_run, rejected_run}
    token = csrf_token(page.text)

    forged = await open_console.post(
        f"/console/runs/{approved_run}/confirmations/{forms[approved_run]}",
        data={"csrf_token": "nope", "decision": "approve"},
    )
    approve = await open_console.post(
        f"/console/runs/{approved_run}/confirmations/{forms[approved_run]}",
        data={"csrf_token": token, "decision": "approve", "reason": "checked"},
    )
    reject = await open_console.post(
        f"/console/runs/{rejected_run}/confirmations/{forms[rejected_run]}",
        data={"csrf_token": token, "decision": "reject", "reason": "too much"},
    )
    again = await open_console.post(
        f"/console/runs/{rejected_run}/confirmations/{forms[rejected_run]}",
        data={"csrf_token": token, "decision": "approve"},
    )

    assert forged.status_code == 403
    assert approve.headers["location"] == "/console/confirmations?done=approved"
    assert reject.headers["location"] == "/console/confirmations?done=rejected"
    assert again.headers["location"] == "/console/confirmations?done=conflict"

    async def approved_run_succeeded() -> bool:
        status = (await open_console.get(f"/runs/{approved_run}")).json()["status"]
        return bool(status == "succeeded")

    await wait_for(approved_run_succeeded, "the approved run went on and succeeded")
    rejected = (await open_console.get(f"/runs/{rejected_run}/receipts")).json()["items"]
    assert [(r["call_key"], r["status"]) for r in rejected] == [("p", "denied"), ("z", "skipped")]
    decided = await open_console.get("/console/confirmations", params={"status": "rejected"})
    assert "too much" in decided.text


async def test_a_key_without_the_decide_scope_sees_no_buttons_and_cannot_post(
    make_app: AppFactory, keys: tuple[Path, dict[str, str]]
) -> None:
    path, secrets = keys
    async with make_app(REGISTRY, api_keys=path) as (_, client):
        run_id = await run_plan(
            client, call("p", "pay", text="1"), Authorization=f"Bearer {secrets['worker']}"
        )
        form = await client.get("/console/sign-in")
        await client.post(
            "/console/sign-in",
            data={"csrf_token": csrf_token(form.text), "api_key": secrets["worker"]},
        )
        page = await client.get("/console/confirmations")
        (cid,) = re.findall(r'id="confirmation-([^"]+)"', page.text)
        refused = await client.post(
            f"/console/runs/{run_id}/confirmations/{cid}",
            data={"csrf_token": csrf_token(page.text), "decision": "approve"},
        )
    assert page.status_code == 200
    assert "Approve" not in page.text
    assert refused.status_code == 403
    assert "confirmations:decide" in refused.text
