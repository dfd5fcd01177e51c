"""Shadow guardrails over HTTP, and `toolloop policy backtest` over the calls such runs
stored, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from app.cli import main
from app.settings import Settings
from tests.router import router_tools
from tests.router.http_support import run_body
from tests.support.fake_llm import FakeLLM, openai_calls, openai_text


async def _backtest(
    settings: Settings, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str]:
    capsys.readouterr()
    argv = [
        "policy",
        "backtest",
        "--registry",
        str(settings.registries[0]),
        "--database-url",
        settings.database_url,
        *extra,
    ]
    code = await asyncio.to_thread(main, argv)
    return code, capsys.readouterr().out


async def _shadowed_run(client: httpx.AsyncClient, model: FakeLLM) -> dict[str, Any]:
    model.script(
        openai_calls(("c1", "echo", {"text": "hi"}), ("c2", "lookup", {"term": "x"})),
        openai_text("enough"),
        openai_text("done"),
    )
    response = await client.post("/router/runs", json=run_body(guardrails=["shadow_no_echo"]))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_shadow_denial_is_audited_and_the_call_runs(
    client: httpx.AsyncClient, model: FakeLLM
) -> None:
    body = await _shadowed_run(client, model)

    assert body["status"] == "done"
    assert sorted(r["status"] for r in body["receipts"]) == ["succeeded", "succeeded"]
    assert sorted(tool for tool, _ in router_tools.CALLS) == ["echo", "lookup"]
    audit = await client.get(f"/runs/{body['run_id']}/audit", params={"limit": 200})
    assert audit.status_code == 200, audit.text
    shadow = [e for e in audit.json()["items"] if e["kind"] == "router.shadow_denied"]
    assert [(e["tool"], e["call_key"], e["detail"]["guardrail"]) for e in shadow] == [
        ("echo", "t1c0", "shadow_no_echo")
    ]
    metrics = await client.get("/metrics")
    assert (
        'toolloop_guardrail_shadow_total{guardrail="shadow_no_echo",outcome="denied"}'
        in metrics.text
    )


async def test_a_backtest_reports_what_a_guardrail_would_have_denied(
    client: httpx.AsyncClient,
    model: FakeLLM,
    settings: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    since = datetime.now(UTC) - timedelta(seconds=1)
    body = await _shadowed_run(client, model)
    window = (
        "--since",
        since.isoformat(),
        "--until",
        (datetime.now(UTC) + timedelta(1)).isoformat(),
    )

    code, out = await _backtest(settings, capsys, "--guardrail", "no_echo", *window, "--json")

    assert code == 0
    report = orjson.loads(out)
    assert (report["guardrail"], report["calls"], report["would_deny"]) == ("no_echo", 2, 1)
    assert report["unreadable"] == 0
    assert [(d["run_id"], d["call_key"], d["tool"], d["reason"]) for d in report["denied"]] == [
        (body["run_id"], "t1c0", "echo", "echo is not allowed here")
    ]

    code, out = await _backtest(settings, capsys, "--guardrail", "broken_guardrail", *window)
    assert code == 0
    assert out.splitlines()[0] == (
        "broken_guardrail: 2 call(s), would deny 0, failed on 2, 0 unreadable"
    )
    assert all(line.startswith("failed\t" + body["run_id"]) for line in out.splitlines()[1:])

    later = ("--since", (datetime.now(UTC) + timedelta(seconds=5)).isoformat())
    code, out = await _backtest(settings, capsys, "--guardrail", "no_echo", *later, "--json")
    assert (code, orjson.loads(out)["calls"]) == (0, 0)


async def test_a_backtest_names_an_unknown_guardrail(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    argv = ["policy", "backtest", "--registry", str(settings.registries[0])]
    code = await asyncio.to_thread(
        main, [*argv, "--guardrail", "ghost", "--since", "2026-01-01T00:00:00Z"]
    )
    assert code == 1
    assert "unknown guardrail 'ghost'" in capsys.readouterr().err


def test_a_backtest_wants_rfc3339_times(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["policy", "backtest", "--guardrail", "g", "--since", "yesterday"])
    assert exited.value.code == 2
    assert "RFC 3339" in capsys.readouterr().err
