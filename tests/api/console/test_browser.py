"""The console in a real browser: Debian's Chromium driven by Playwright against a real
`toolloop serve` with API keys, on 127.0.0.1. Signs in, finds and opens runs, watches a
running plan finish live, cancels one, searches receipts, reads the tools page, signs
out; checks that nothing is loaded from another host and that no page shows a secret.

Screenshots go to a temp folder, or to `docs/console/` with
TOOLLOOP_CONSOLE_SCREENSHOTS=docs/console (how the README's pictures are made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from app.api.auth.keys_file import create_key
from tests.api.console.console_registry import call, write_registry
from tests.api.console.console_tools import GATE_DIR_ENV
from tests.live_server import REPO, ServerProcess

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SECRET = "hunter2-browser-secret"
# Chromium's own background traffic is off: this machine has no network but loopback.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("TOOLLOOP_REQUIRE_BROWSER"),
    reason="Chromium is not installed (apt-get install chromium); .ci/run installs it",
)


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[tuple[ServerProcess, str]]:
    keys = tmp_path / "keys.yml"
    admin = create_key(keys, "ops", ["admin"])
    env = {
        "TOOLLOOP_REGISTRIES": str(write_registry(tmp_path)),
        "TOOLLOOP_DATABASE_URL": database_url,
        "TOOLLOOP_API_KEYS": str(keys),
        "TOOLLOOP_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(REPO),
        GATE_DIR_ENV: str(tmp_path),
    }
    process = ServerProcess(tmp_path, [], env)
    try:
        process.wait_until_answering()
        yield process, admin
    finally:
        process.stop()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    chosen = os.environ.get("TOOLLOOP_CONSOLE_SCREENSHOTS")
    folder = (REPO / chosen) if chosen else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_plan(base: str, key: str, *calls: dict[str, object], wait: bool = True) -> str:
    headers = {"Authorization": f"Bearer {key}"}
    if not wait:
        headers["Prefer"] = "respond-async"
    response = httpx.post(
        f"{base}/plans/sequential",
        json={"owner": "desk", "calls": list(calls), "context": {"trace_id": "console-tour"}},
        headers=headers,
        timeout=30,
    )
    assert response.status_code in (200, 202), response.text
    body = response.json()
    return str(body.get("plan_id") or body["run_id"])


def test_an_operator_tours_the_console(
    server: tuple[ServerProcess, str], tmp_path: Path, screenshots: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    process, key = server
    base = process.base
    done = start_plan(base, key, call("a", "echo", text="hello", secret=SECRET))
    failed = start_plan(base, key, call("a", "echo", text="x"), call("b", "fail", text="boom"))

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        hosts: set[str] = set()
        page.on("request", lambda request: hosts.add(urlsplit(request.url).hostname or ""))
        page.set_default_timeout(30_000)

        page.goto(f"{base}/console/runs")
        expect(page).to_have_url(f"{base}/console/sign-in?next=/console/runs")
        page.screenshot(path=screenshots / "sign-in.png")
        page.get_by_label("API key").fill(key)
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        page.screenshot(path=screenshots / "runs.png", full_page=True)

        page.get_by_label("Status").select_option("failed")
        page.get_by_role("button", name="Filter").click()
        page.get_by_role("link", name=failed).click()
        expect(page.get_by_role("cell", name="refused 4 characters")).to_be_visible()
        expect(page.locator("svg.timeline rect.bar")).to_have_count(2)
        page.screenshot(path=screenshots / "run.png", full_page=True)

        page.goto(f"{base}/console/runs/{done}")
        assert SECRET not in page.content()
        expect(page.get_by_text("console-tour").first).to_be_visible()  # its request context

        live = start_plan(
            base, key, call("a", "echo", text="1"), call("g", "gate", label="open-live"), wait=False
        )
        page.goto(f"{base}/console/runs/{live}")
        expect(page.locator("#run-status")).to_contain_text("running")
        (tmp_path / "open-live").touch()
        expect(page.locator("#run-status")).to_contain_text("succeeded")
        expect(page.locator("#receipt--g .status-cell")).to_contain_text("succeeded")

        held = start_plan(base, key, call("g", "gate", label="never-opened"), wait=False)
        page.goto(f"{base}/console/runs/{held}")
        page.get_by_role("button", name="Cancel run").click()
        expect(page.get_by_role("status")).to_contain_text("The run was cancelled.")
        expect(page.locator("#run-status")).to_contain_text("cancelled")

        paying = start_plan(base, key, call("p", "pay", text="10", secret=SECRET))
        refusing = start_plan(base, key, call("p", "pay", text="99"), call("z", "echo", text="z"))
        page.get_by_role("link", name="Approvals").click()
        expect(page.locator("article.confirmation")).to_have_count(2)
        assert SECRET not in page.content()
        page.screenshot(path=screenshots / "approvals.png", full_page=True)
        waiting = page.locator("article.confirmation", has_text=paying)
        waiting.get_by_label("Reason").fill("checked the invoice")
        waiting.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("status")).to_contain_text("Approved")
        page.locator("article.confirmation", has_text=refusing).get_by_role(
            "button", name="Reject"
        ).click()
        expect(page.get_by_role("status")).to_contain_text("Rejected")
        expect(page.locator("article.confirmation")).to_have_count(0)
        page.goto(f"{base}/console/runs/{paying}")
        expect(page.locator("#run-status")).to_contain_text("succeeded")
        page.goto(f"{base}/console/runs/{refusing}")
        expect(page.locator("#receipt--p .status-cell")).to_contain_text("denied")
        expect(page.locator("#receipt--z .status-cell")).to_contain_text("skipped")

        page.goto(f"{base}/console/receipts")
        page.get_by_label("Tool").fill("fail")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("#receipt-rows tr")).to_have_count(1)
        page.screenshot(path=screenshots / "receipts.png", full_page=True)

        page.goto(f"{base}/console/tools")
        expect(page.locator("#tool-echo")).to_contain_text("last day")
        page.screenshot(path=screenshots / "tools.png", full_page=True)

        phone = browser.new_page(viewport={"width": 390, "height": 844})
        phone.context.add_cookies(page.context.cookies())
        phone.goto(f"{base}/console/runs")
        overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0
        phone.screenshot(path=screenshots / "runs-phone.png")

        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(f"{base}/console/sign-in")
        page.goto(f"{base}/console/runs/{done}")
        expect(page).to_have_url(f"{base}/console/sign-in?next=/console/runs/{done}")
        browser.close()

    assert hosts == {"127.0.0.1"}
