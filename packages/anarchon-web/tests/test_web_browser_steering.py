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
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from anarchon import Scheduler
from anarchon.background import start_in_background

pytestmark = [pytest.mark.slow, pytest.mark.sqlite]

TOKEN = "browser-" + secrets.token_urlsafe(24)


def audit(url: str) -> list[dict[str, object]]:
    """``anarchon audit --json`` as an operator runs it, newest first."""
    argv = [sys.executable, "-m", "anarchon", "audit", "--backend", url, "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    entries: list[dict[str, object]] = json.loads(done.stdout)
    return entries


def test_sign_in_pause_resume_and_trigger_in_the_browser(
    tmp_path: Path, browser: Any, serve_web: Any, artifacts: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.sqlite3'}"
    ran: list[int] = []
    instance = Scheduler(url, instance_id="instance-1")
    instance.add("tally", "0 0 1 1 *", lambda: ran.append(1))
    running = start_in_background(instance)
    env = {**os.environ, "ANARCHON_WEB_TOKEN": TOKEN}
    server, address = serve_web(url, "--token-user", "alice", env=env)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 700})  # type: ignore[attr-defined]
        page.goto(address + "jobs/tally")
        page.wait_for_url("**/sign-in?next=/jobs/tally")
        page.fill('input[name="token"]', "a wrong token, long enough")
        page.click('#sign-in-form button[type="submit"]')
        assert "that is not this dashboard" in page.locator("#sign-in-problem").inner_text()
        page.fill('input[name="token"]', TOKEN)
        page.screenshot(path=str(artifacts / "sign-in.png"))
        page.click('#sign-in-form button[type="submit"]')
        page.wait_for_url("**/jobs/tally")
        assert page.locator("#signed-in").inner_text() == "alice"

        page.fill('#pause-form input[name="reason"]', "db migration until 14:00")
        page.click('#pause-form button[type="submit"]')
        assert page.locator("#confirm-title").inner_text().startswith("pause")
        assert "db migration until 14:00" in page.locator("#confirm-details").inner_text()
        page.screenshot(path=str(artifacts / "confirm-pause.png"))
        page.click('#confirm-form button[type="submit"]')
        page.wait_for_url("**/jobs/tally")
        pause = page.locator("#pause").inner_text()
        assert "alice" in pause and "db migration until 14:00" in pause
        page.screenshot(path=str(artifacts / "job-paused.png"), full_page=True)
        bearer = {"authorization": f"Bearer {TOKEN}"}
        state = httpx.get(address + "jobs/tally?format=json", headers=bearer, timeout=5).json()
        assert state["paused"]["by"] == "alice" and state["paused"]["reason"] == "db migration until 14:00"

        page.goto(address)
        tag = page.locator('tr[data-job="tally"] .tag.paused')
        assert "by alice: db migration until 14:00" in (tag.get_attribute("title") or "")
        page.screenshot(path=str(artifacts / "jobs-paused.png"), full_page=True)
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
        page.screenshot(path=str(artifacts / "job-triggered.png"), full_page=True)

        trail = audit(url)
        assert [(e["action"], e["by"], e["reason"]) for e in trail] == [
            ("trigger", "alice", "check the fix"),
            ("resume", "alice", "migration done"),
            ("pause", "alice", "db migration until 14:00"),
        ]
        page.goto(address + "audit")
        rows = page.locator("table.audit tbody tr")
        assert rows.count() == 3 and "check the fix" in rows.first.inner_text()
        page.screenshot(path=str(artifacts / "audit.png"), full_page=True)
        page.close()
    finally:
        server.terminate()
        server.wait(30)
        running.stop()
    assert (artifacts / "job-triggered.png").stat().st_size > 10_000
