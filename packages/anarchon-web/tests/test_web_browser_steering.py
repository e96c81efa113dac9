"""Sign-in and steering in a real headless Chromium (Debian's, through Playwright), over a running instance.

An instance (a scheduler in a thread of this process) runs ``tally`` on a
fresh SQLite file; ``anarchon-web --backend URL`` serves the dashboard with
``ANARCHON_WEB_TOKEN`` and ``--token-user alice``, reading the job from the
fleet registry. The browser signs in through the form, pauses the job with
a reason (through the confirmation), sees the pause with the reason and the
name on the jobs and job pages and in ``anarchon audit``, resumes it, and
triggers a run, which the instance runs and the job page shows without a
reload (its live refresh); the dashboard's audit page lists the three
actions. Screenshots go to ``test-artifacts/web/`` as in ``test_web_browser``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from anarchon import Scheduler
from anarchon.background import start_in_background
from anarchon_conformance import free_port

pytestmark = [pytest.mark.slow, pytest.mark.sqlite]

CHROMIUM = os.environ.get("ANARCHON_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = Path(os.environ.get("ANARCHON_ARTIFACTS", ROOT / "test-artifacts")) / "web"
TOKEN = "browser-" + secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver, or set ANARCHON_CHROMIUM"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so this must not be skipped: {reason}")
        pytest.skip(f"!!! SKIPPED: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def serve(url: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    argv = [sys.executable, "-m", "anarchon_web.cli", "--backend", url, "--port", str(port), "--token-user", "alice"]
    env = {**os.environ, "ANARCHON_WEB_TOKEN": TOKEN}
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    address = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(address + "static/style.css", timeout=5).raise_for_status()
            return server, address
        except httpx.ConnectError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise AssertionError(f"anarchon-web did not start: {server.communicate()}") from None
            time.sleep(0.05)


def audit(url: str) -> list[dict[str, object]]:
    """``anarchon audit --json`` as an operator runs it, newest first."""
    argv = [sys.executable, "-m", "anarchon", "audit", "--backend", url, "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    entries: list[dict[str, object]] = json.loads(done.stdout)
    return entries


def test_sign_in_pause_resume_and_trigger_in_the_browser(tmp_path: Path, browser: object) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'fleet.sqlite3'}"
    ran: list[int] = []
    instance = Scheduler(url, instance_id="instance-1")
    instance.add("tally", "0 0 1 1 *", lambda: ran.append(1))
    running = start_in_background(instance)
    server, address = serve(url)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 700})  # type: ignore[attr-defined]
        page.goto(address + "jobs/tally")
        page.wait_for_url("**/sign-in?next=/jobs/tally")
        page.fill('input[name="token"]', "a wrong token, long enough")
        page.click('#sign-in-form button[type="submit"]')
        assert "that is not this dashboard" in page.locator("#sign-in-problem").inner_text()
        page.fill('input[name="token"]', TOKEN)
        page.screenshot(path=str(ARTIFACTS / "sign-in.png"))
        page.click('#sign-in-form button[type="submit"]')
        page.wait_for_url("**/jobs/tally")
        assert page.locator("#signed-in").inner_text() == "alice"

        page.fill('#pause-form input[name="reason"]', "db migration until 14:00")
        page.click('#pause-form button[type="submit"]')
        assert page.locator("#confirm-title").inner_text().startswith("pause")
        assert "db migration until 14:00" in page.locator("#confirm-details").inner_text()
        page.screenshot(path=str(ARTIFACTS / "confirm-pause.png"))
        page.click('#confirm-form button[type="submit"]')
        page.wait_for_url("**/jobs/tally")
        pause = page.locator("#pause").inner_text()
        assert "alice" in pause and "db migration until 14:00" in pause
        page.screenshot(path=str(ARTIFACTS / "job-paused.png"), full_page=True)
        bearer = {"authorization": f"Bearer {TOKEN}"}
        state = httpx.get(address + "jobs/tally?format=json", headers=bearer, timeout=5).json()
        assert state["paused"]["by"] == "alice" and state["paused"]["reason"] == "db migration until 14:00"

        page.goto(address)
        tag = page.locator('tr[data-job="tally"] .tag.paused')
        assert "by alice: db migration until 14:00" in (tag.get_attribute("title") or "")
        page.screenshot(path=str(ARTIFACTS / "jobs-paused.png"), full_page=True)
        (paused,) = audit(url)
        assert (paused["action"], paused["job"], paused["by"], paused["reason"]) == (
            "pause",
            "tally",
            "alice",
            "db migration until 14:00",
        )

        page.click('a.job:text-is("tally")')
        page.wait_for_url("**/jobs/tally")
        page.fill('#resume-form input[name="reason"]', "migration done")
        page.click('#resume-form button[type="submit"]')
        page.wait_for_url("**/jobs/tally")
        assert page.locator("#pause").count() == 0 and page.locator("#pause-form").count() == 1

        page.fill('#trigger-form input[name="reason"]', "check the fix")
        page.click('#trigger-form button[type="submit"]')
        assert page.locator("#confirm-title").inner_text().startswith("trigger")
        page.click('#confirm-form button[type="submit"]')
        page.wait_for_url("**/jobs/tally")
        page.evaluate("window.anarchonTestMark = 'this page, not reloaded'")
        # The run appears by the page's own refresh (live.js), within the run and a refresh or two.
        page.wait_for_selector("table.history .tag:text-is('manual')", timeout=30_000)
        assert ran, "the page shows a manual run the instance did not run"
        assert page.evaluate("window.anarchonTestMark") == "this page, not reloaded", "the page was reloaded"
        assert "instance-1" in page.locator("table.history tbody tr").first.inner_text()
        page.screenshot(path=str(ARTIFACTS / "job-triggered.png"), full_page=True)

        trail = audit(url)
        assert [(e["action"], e["by"], e["reason"]) for e in trail] == [
            ("trigger", "alice", "check the fix"),
            ("resume", "alice", "migration done"),
            ("pause", "alice", "db migration until 14:00"),
        ]
        page.goto(address + "audit")
        rows = page.locator("table.audit tbody tr")
        assert rows.count() == 3 and "check the fix" in rows.first.inner_text()
        page.screenshot(path=str(ARTIFACTS / "audit.png"), full_page=True)
        page.close()
    finally:
        server.terminate()
        server.wait(30)
        running.stop()
    assert (ARTIFACTS / "job-triggered.png").stat().st_size > 10_000
