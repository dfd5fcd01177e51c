"""`toolloop audit export` and `toolloop audit verify` end to end, with `GET /runs/{id}/proof`
beside them: runs written through the service on both databases, their stored rows then
changed, removed, reordered or inserted by SQL; every change is found by both."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from fastapi import FastAPI

from app.api.app import create_app
from app.cli import main
from app.settings import Settings
from tests.evidence_support import TAMPERS, change_audit_detail, export, tamper, verify, write_runs
from tests.faults import fault_tools
from tests.faults.registry import hold, sequential, step
from tests.faults.registry import write_registry as write_fault_registry
from tests.router.http_support import router_settings
from tests.support.app import running
from tests.support.fake_llm import FakeLLM
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_tools(fresh_router_tools: None) -> None:
    """The router test tools start fresh."""


@pytest.fixture
def settings(database_url: str, tmp_path: Path, model_url: str) -> Settings:
    return router_settings(database_url, tmp_path, model_url)


@pytest.fixture
async def written(settings: Settings, model: FakeLLM) -> tuple[str, str]:
    """(a plan run, a router run) written by a service that then stopped: the checkpoint
    it writes as it stops holds both runs' lengths and heads."""
    async with running(settings) as (app, client):
        return await write_runs(app, client, model)


@pytest.fixture
async def app(settings: Settings, written: tuple[str, str]) -> AsyncIterator[FastAPI]:
    """The service started again on the database `written` wrote."""
    started = create_app(settings)
    async with started.router.lifespan_context(started):
        yield started


async def test_untouched_runs_verify_over_http_and_offline(
    app: FastAPI,
    client: httpx.AsyncClient,
    written: tuple[str, str],
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan_id, router_id = written

    for run_id in (plan_id, router_id):
        proof = (await client.get(f"/runs/{run_id}/proof")).json()
        assert proof["check"] == {"intact": True, "problems": [], "notes": proof["check"]["notes"]}
        assert proof["length"] == len(proof["entries"]) > 0
        assert [e["position"] for e in proof["entries"]] == list(range(1, proof["length"] + 1))
        assert proof["head"] == proof["entries"][-1]["link"]
        assert proof["unchained"] == 0
        assert proof["checkpoint"] is not None
        assert any(held["run_id"] == run_id for held in proof["checkpoint"]["runs"])
        bundle = tmp_path / f"{run_id}.jsonl"
        assert await export(database_url, bundle, run_id) == 0
        status, lines = verify(bundle, capsys)
        assert status == 0, lines
        assert lines[0].startswith("intact: 1 chain(s)")
        assert not any("no checkpoint covers" in line for line in lines)


@pytest.mark.parametrize("change", TAMPERS.values(), ids=TAMPERS.keys())
async def test_a_tampered_plan_run_is_found_over_http_and_offline(
    change: object,
    app: FastAPI,
    client: httpx.AsyncClient,
    written: tuple[str, str],
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan_id, router_id = written
    await tamper(app, plan_id, change)  # type: ignore[arg-type]

    check = (await client.get(f"/runs/{plan_id}/proof")).json()["check"]
    assert check["intact"] is False
    assert check["problems"]
    assert all(problem.startswith(plan_id) for problem in check["problems"])
    untouched = (await client.get(f"/runs/{router_id}/proof")).json()["check"]
    assert untouched["intact"] is True

    bundle = tmp_path / "plan.jsonl"
    assert await export(database_url, bundle, plan_id) == 0
    status, lines = verify(bundle, capsys)
    assert status == 1
    problems = [line for line in lines if line.startswith("problem: ")]
    assert problems == [f"problem: {problem}" for problem in check["problems"]]


async def test_a_tampered_router_run_is_found_in_a_window_s_bundle(
    app: FastAPI,
    client: httpx.AsyncClient,
    written: tuple[str, str],
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan_id, router_id = written
    rejected = await client.post("/plans/sequential", json={"owner": "agent", "calls": []})
    assert rejected.status_code == 422
    await app.state.runtime.writer.flush()
    window = tmp_path / "window.jsonl"
    assert await export(database_url, window, "--since", "2000-01-01T00:00:00Z") == 0
    assert verify(window, capsys)[0] == 0
    header = json.loads(window.read_text().splitlines()[0])
    assert {plan_id, router_id} <= set(header["chains"])
    # The rejected plan's audit row, of no run, is in its day's chain.
    assert [chain for chain in header["chains"] if chain.startswith("day:")]

    await tamper(app, router_id, change_audit_detail)

    assert await export(database_url, window, "--since", "2000-01-01T00:00:00Z") == 0
    status, lines = verify(window, capsys)
    assert status == 1
    assert [line for line in lines if line.startswith("problem: ")]
    assert all(router_id in line for line in lines if line.startswith("problem: "))


async def test_a_bundle_verifies_in_a_process_with_no_database_nor_service_imports(
    app: FastAPI,
    client: httpx.AsyncClient,
    written: tuple[str, str],
    database_url: str,
    tmp_path: Path,
) -> None:
    plan_id, _ = written
    bundle = tmp_path / "plan.jsonl"
    assert await export(database_url, bundle, plan_id) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLLOOP_")}
    toolloop = Path(sys.executable).parent / "toolloop"

    verified = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-X", "importtime", str(toolloop), "audit", "verify", str(bundle)],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )

    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("intact: 1 chain(s)")
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in verified.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "app" in imported
    assert not imported & {"sqlalchemy", "fastapi", "pydantic", "starlette", "alembic"}
    assert not list(elsewhere.iterdir())  # no database file made


def test_verify_says_an_unreadable_bundle_is_one(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"format": "something-else", "version": 1}\n')
    for path, said in ((broken, "not an audit bundle"), (tmp_path / "missing", "cannot read")):
        verified = subprocess.run(
            [sys.executable, "-m", "app.entry_point", "audit", "verify", str(path)],
            capture_output=True,
            text=True,
        )
        assert verified.returncode == 2
        assert verified.stdout == ""
        assert said in verified.stderr
        assert "Traceback" not in verified.stderr
        assert len(verified.stderr.splitlines()) == 1


def _key_pair(directory: Path, name: str) -> tuple[Path, Path]:
    """(private key PEM, public key PEM) files of a new Ed25519 key."""
    key = Ed25519PrivateKey.generate()
    private = directory / f"{name}.pem"
    public = directory / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    public.write_bytes(
        key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


async def test_signed_checkpoints_verify_with_their_key_and_fail_with_another(
    database_url: str,
    tmp_path: Path,
    model: FakeLLM,
    model_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    private, public = _key_pair(tmp_path, "operator")
    _, stranger = _key_pair(tmp_path, "stranger")
    # A checkpoint at each run's end, while the service runs.
    settings = router_settings(
        database_url,
        tmp_path,
        model_url,
        chain_checkpoint_runs=1,
        checkpoint_signing_key=str(private),
    )
    async with running(settings) as (app, client):
        plan_id, _ = await write_runs(app, client, model)
        proof = (await client.get(f"/runs/{plan_id}/proof")).json()
        assert proof["checkpoint"]["signature"] is not None
        assert proof["check"]["problems"] == []
        bundle = tmp_path / "signed.jsonl"
        assert await export(database_url, bundle, plan_id) == 0
    lines = [json.loads(line) for line in bundle.read_text().splitlines()]
    checkpoints = [line["row"] for line in lines if line.get("kind") == "checkpoint"]
    assert checkpoints
    assert all(checkpoint["signature"] for checkpoint in checkpoints)

    status, lines = verify(bundle, capsys, "--public-key", str(public))
    assert status == 0, lines
    assert not any("signature" in line for line in lines)

    status, lines = verify(bundle, capsys, "--public-key", str(stranger))
    assert status == 1
    assert any("signature does not verify" in line for line in lines)

    status, lines = verify(bundle, capsys)
    assert status == 0
    assert "note: signatures not checked: no public key given" in lines


def test_export_says_what_it_cannot_do_in_one_line(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--database-url", sqlite_url]) == 0
    out = tmp_path / "bundle.jsonl"
    for argv, said in (
        (["--out", str(out)], "audit export takes a RUN_ID or --since, one of them"),
        (["r", "--since", "2026-01-01T00:00:00Z", "--out", str(out)], "one of them"),
        (["r", "--until", "2026-01-01T00:00:00Z", "--out", str(out)], "--until goes with"),
        (["no-such-run", "--out", str(out)], "there is no run no-such-run"),
    ):
        capsys.readouterr()
        assert main(["audit", "export", *argv, "--database-url", sqlite_url]) == 1
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1, error
        assert said in error[0]
    assert list(tmp_path.glob("bundle.jsonl*")) == []

    never_migrated = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
    argv = ["audit", "export", "r", "--out", str(out), "--database-url", never_migrated]
    assert main(argv) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1, error
    assert "toolloop db upgrade" in error[0]
    assert list(tmp_path.glob("bundle.jsonl*")) == []


async def test_a_resumed_run_s_replaced_receipts_stay_verifiable(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(registries=[write_fault_registry(tmp_path)], database_url=database_url)
    plan = sequential(step("a"), hold("b"), step("c"))
    fault_tools.reset()
    try:
        async with running(settings) as (app, client):
            started = await client.post(
                "/plans/sequential", json=plan, headers={"Prefer": "respond-async"}
            )
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            await wait_for(lambda: len(fault_tools.calls) == 2)
        # The shutdown left `b` cancelled and `c` skipped; the resume replaces both.
        async with running(settings) as (app, client):
            fault_tools.release("b")
            resumed = await client.post(f"/runs/{run_id}/resume", json=plan)
            assert resumed.status_code == 200, resumed.text
            assert resumed.json()["status"] == "succeeded"
            await app.state.runtime.writer.flush()
            proof = (await client.get(f"/runs/{run_id}/proof")).json()
    finally:
        fault_tools.reset()

    assert proof["check"]["problems"] == []
    assert len(proof["superseded"]) == 2
    assert proof["length"] == len(proof["entries"]) + len(proof["superseded"])
    bundle = tmp_path / "resumed.jsonl"
    assert await export(database_url, bundle, run_id) == 0
    status, lines = verify(bundle, capsys)
    assert status == 0, lines
