"""Fake secrets through every path; none reaches a log line, a stored row, audit or /metrics.

Each secret is sent in arguments (echoed back as output, whole or past the
stored-size cap, whose truncated copy keeps a preview), in an error message,
in rejected plans, in the plan context, in headers (a bad API key, a custom
header, a request id) and in paths and query strings.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.settings import Settings
from tests.observability.conftest import bearer, serving
from tests.observability.registry import OWNER

# (what is sent, the part that must never appear)
SECRETS: dict[str, tuple[str, str]] = {
    "bearer": ("Bearer tok3nVALUEabcdef0123456789", "tok3nVALUEabcdef0123456789"),
    "sk": ("sk-goldenSECRET0123456789abcdef", "goldenSECRET0123456789abcdef"),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJnb2xkZW4ifQ.c2lnbmF0dXJlZ29sZGVu",
        "eyJzdWIiOiJnb2xkZW4ifQ",
    ),
    "aws": ("AKIAGOLDENSECRET1234", "AKIAGOLDENSECRET1234"),
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEgoldenPRIVATEbody0123\n-----END RSA PRIVATE KEY-----",
        "MIIEgoldenPRIVATEbody0123",
    ),
    "url": ("postgres://admin:hunter2GOLDENpw@db.example:5432/app", "hunter2GOLDENpw"),
    # ToolLoop's own key format (`toolloop keys create`).
    "toolloop": (
        "tl_0123456789ab_goldenTOOLLOOPsecret0123456789abcdefghijklmnopq",
        "goldenTOOLLOOPsecret0123456789abcdefghijklmnopq",
    ),
}
NEEDLES = [needle for _, needle in SECRETS.values()]
ALL_SECRETS = " | ".join(sent for sent, _ in SECRETS.values())
BASE_URL = "http://127.0.0.1"
TABLES = ("receipts", "audit_events", "runs", "cache_entries", "idempotency_keys")


def _leaks(where: str, haystack: str) -> list[str]:
    return [f"{where}: {needle}" for needle in NEEDLES if needle in haystack]


def _service_lines(logged: str) -> list[str]:
    """The captured lines minus the test client's own httpx lines (it sends the secrets)."""
    kept = []
    for line in logged.splitlines():
        record = orjson.loads(line)
        own = record["logger"] == "httpx" and record["message"].startswith(
            f"HTTP Request: GET {BASE_URL}/"
        )
        if not own:
            kept.append(line)
    return kept


def _call(key: str, tool: str, text: str) -> dict[str, Any]:
    return {"call_key": key, "tool": tool, "args": {"text": text}}


async def _send_secrets_everywhere(client: httpx.AsyncClient, good: dict[str, str]) -> list[str]:
    """Drive every path; returns the run ids whose audit must be checked."""
    runs = []
    for tool in ("echo", "cached_echo", "padded_echo", "leak"):
        for name, (sent, _) in SECRETS.items():
            response = await client.post(
                "/plans/sequential",
                json={
                    "owner": OWNER,
                    "calls": [_call("1", tool, sent), _call("2", "echo", ALL_SECRETS)],
                    "context": {"trace_id": sent},
                },
                headers={**good, "X-Api-Token": sent, "Idempotency-Key": f"{tool}-{name}"},
            )
            assert response.status_code == 200, response.text
            runs.append(response.json()["plan_id"])
    parallel = await client.post(
        "/plans/parallel",
        json={
            "owner": OWNER,
            "max_concurrency": 4,
            "lanes": [
                {"item_key": name, "calls": [_call("1", "leak", sent)]}
                for name, (sent, _) in SECRETS.items()
            ],
        },
        headers=good,
    )
    assert parallel.status_code == 200, parallel.text
    runs.append(parallel.json()["plan_id"])
    for sent, _ in SECRETS.values():
        rejected = await client.post(
            "/plans/sequential",
            json={"owner": sent, "calls": [_call("1", sent, sent)]},
            headers=good,
        )
        assert rejected.status_code == 422
        too_long = await client.post(
            "/plans/sequential",
            json={"owner": OWNER, "calls": [_call("1", "echo", sent * 200)]},
            headers=good,
        )
        assert too_long.status_code == 422
        first_line = sent.splitlines()[0]
        for authorization in (first_line, f"Bearer {first_line}"):
            bad_key = await client.get("/metrics", headers={"Authorization": authorization})
            assert bad_key.status_code in (401, 429)
        await client.get(f"/runs/{sent.splitlines()[0]}", params={"token": sent}, headers=good)
    for request_id in (SECRETS["aws"][0], SECRETS["toolloop"][0]):
        echoed = await client.get("/healthz", headers={"X-Request-ID": request_id})
        assert request_id not in echoed.headers["x-request-id"]
    return runs


async def test_no_secret_reaches_logs_rows_audit_or_metrics(
    registry_path: Path, database_url: str, keys_path: Path, json_logs: io.StringIO
) -> None:
    good = bearer(keys_path, "golden", "plans:execute", "runs:read:all", "metrics:read")
    settings = Settings(
        registries=[registry_path],
        database_url=database_url,
        api_keys=keys_path,
        max_stored_output_bytes=1024,  # padded_echo's outputs are stored truncated
    )

    leaks: list[str] = []
    async with serving(settings) as client:
        runs = await _send_secrets_everywhere(client, good)
        # The caller's own response carries its secrets back: that is its copy, not a leak.
        for run_id in runs:
            for path in ("audit", "receipts"):
                response = await client.get(f"/runs/{run_id}/{path}", headers=good)
                assert response.status_code == 200
                leaks += _leaks(f"/runs/{{id}}/{path}", response.text)
        metrics = await client.get("/metrics", headers=good)
        leaks += _leaks("/metrics", metrics.text)

    logged = json_logs.getvalue()
    assert "toolloop.http" in logged
    assert len(_service_lines(logged)) < len(logged.splitlines())
    leaks += _leaks("logs", "\n".join(_service_lines(logged)))
    database = create_async_engine(database_url)
    try:
        async with database.connect() as connection:
            for table in TABLES:
                rows = (await connection.execute(text(f"SELECT * FROM {table}"))).all()
                leaks += _leaks(table, repr(rows))
            for table in ("receipts", "idempotency_keys"):
                counted = await connection.execute(text(f"SELECT count(*) FROM {table}"))
                assert counted.scalar_one() > 0, table
            truncated = await connection.execute(
                text("SELECT count(*) FROM receipts WHERE output_truncated")
            )
            assert truncated.scalar_one() == len(SECRETS)
    finally:
        await database.dispose()
    assert not leaks, leaks
