"""Live pages in a real headless Chromium: a run that finishes after the pages loaded shows on the jobs page
and on the job page without a reload, and the filters in their query strings stay.

The dashboard is ``anarchon-web --backend sqlite:///… --refresh-s 1`` in its own process; the test writes
the history through the SQLite backend's API, as an instance of the fleet would. Chromium is Debian's
(``/usr/bin/chromium``, or ``ANARCHON_CHROMIUM``), driven by Playwright's Python package; every wait is
one of Playwright's (a condition with a deadline), never a fixed sleep. Screenshots go to
``test-artifacts/web/`` like the other browser test's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from anarchon import RunStatus
from anarchon_conformance import testing

pytestmark = [pytest.mark.slow, pytest.mark.sqlite]

MINUTE = 60_000
WAIT_MS = 20_000  # the longest any condition may take: the page refreshes every second
#: Refreshing every second, with two jobs named on the command line.
LIVE = ("--refresh-s", "1", "--job", "ledger=* * * * *", "--job", "other=* * * * *")


class Loop:
    """An event loop in a thread of its own: Playwright's sync API already runs one in the test's thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Loop:
        self.thread.start()
        return self

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    def __exit__(self, *_: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def test_a_run_finishing_after_load_shows_without_a_reload_and_filters_stay(
    tmp_path: Path, browser: Any, serve_web: Any, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    from anarchon_sqlite import SQLiteBackend

    database = tmp_path / "live.sqlite3"
    with Loop() as loop:
        backend = SQLiteBackend(str(database))
        loop.run(backend.start())
        job = testing.make_job(backend, "ledger", "* * * * *", lease_ms=600_000)
        current = time.time_ns() // 1_000_000 // MINUTE * MINUTE
        earlier = current - MINUTE

        def claimed(slot_ms: int) -> Any:
            (answer,) = loop.run(backend.claim([testing.make_claim(job, slot_ms, "i1")]))
            assert answer.won and answer.grant is not None, answer
            return answer.grant

        def finish(grant: Any, took_ms: int) -> None:
            start = grant.started_at_ms or time.time_ns() // 1_000_000
            run = grant.finished(RunStatus.SUCCEEDED, started_ms=start, finished_ms=start + took_ms)
            assert loop.run(backend.finish(grant, run))

        finish(claimed(earlier), 120)
        running = claimed(current)
        server, address = serve_web(f"sqlite:///{database}", *LIVE)
        try:
            jobs = browser.new_page(viewport={"width": 1400, "height": 560})
            jobs.goto(address + "?q=led")
            row = jobs.locator('tr[data-job="ledger"]')
            expect(row.locator(f'a.cell[data-slot="{current}"]')).to_have_attribute("data-outcome", "running")
            assert jobs.locator('tr[data-job="other"]').count() == 0
            jobs.evaluate("() => { window.loadedOnce = true; }")  # gone if the page were reloaded
            jobs.fill('input[name="q"]', "ledg")  # typed, never sent: a refresh must neither send nor undo it
            jobs.locator("h1").click()

            job_page = browser.new_page(viewport={"width": 1400, "height": 1400})
            job_page.goto(address + "jobs/ledger?status=succeeded")
            history = job_page.locator("#live-history table.history")
            expect(history.locator(f'a.run[href$="/runs/{earlier}"]')).to_have_count(1)
            expect(history.locator(f'a.run[href$="/runs/{current}"]')).to_have_count(0)
            expect(job_page.locator("#chart-durations")).to_have_attribute("data-count", "1")
            job_page.evaluate("() => { window.loadedOnce = true; }")

            finish(running, 340)  # the run that was running when both pages loaded ends now

            mark = row.locator(f'a.cell[data-slot="{current}"]')
            expect(mark).to_have_attribute("data-outcome", "succeeded", timeout=WAIT_MS)
            assert jobs.url == address + "?q=led", jobs.url
            assert jobs.evaluate("() => window.loadedOnce === true"), "the jobs page was reloaded"
            assert jobs.locator('tr[data-job="other"]').count() == 0, "the name filter was lost"
            assert jobs.input_value('input[name="q"]') == "ledg"
            expect(jobs.locator(".live-state")).to_have_text("live: every 1 s")
            jobs.screenshot(path=str(artifacts / "live-jobs-page.png"), full_page=True)

            expect(history.locator(f'a.run[href$="/runs/{current}"]')).to_have_count(1, timeout=WAIT_MS)
            expect(job_page.locator("#chart-durations")).to_have_attribute("data-count", "2", timeout=WAIT_MS)
            expect(job_page.locator("#chart-outcomes rect.o-succeeded")).not_to_have_count(0)
            assert job_page.url == address + "jobs/ledger?status=succeeded", job_page.url
            assert job_page.evaluate("() => window.loadedOnce === true"), "the job page was reloaded"
            assert job_page.locator('select[name="status"]').input_value() == "succeeded"
            job_page.screenshot(path=str(artifacts / "live-job-page.png"), full_page=True)
            jobs.close()
            job_page.close()
        finally:
            server.terminate()
            server.wait(30)
            loop.run(backend.close())
    assert (artifacts / "live-job-page.png").stat().st_size > 10_000


def test_the_script_waits_while_typing_or_hidden_and_never_sends_a_form(
    tmp_path: Path, browser: Any, serve_web: Any
) -> None:
    """The page's own timers run on Playwright's clock, so each turn of the script is one step here."""
    from playwright.sync_api import expect

    server, address = serve_web(f"sqlite:///{tmp_path / 'quiet.sqlite3'}", *LIVE)
    try:
        page = browser.new_page()
        requests: list[tuple[str, str]] = []
        page.on("request", lambda r: requests.append((r.method, r.url)) if r.resource_type == "fetch" else None)
        page.clock.install()
        page.goto(address + "?q=led")
        state = page.locator("body")
        expect(state).to_have_attribute("data-live-state", "waiting")
        page.evaluate("() => { window.loadedOnce = true; }")

        def one_turn() -> None:
            with page.expect_request(lambda r: r.resource_type == "fetch", timeout=WAIT_MS):
                page.clock.run_for(1000)
            expect(state).to_have_attribute("data-live-state", "waiting", timeout=WAIT_MS)

        one_turn()
        page.focus('input[name="q"]')
        page.keyboard.press("End")
        page.keyboard.type("xy")  # typing, not sent
        page.clock.run_for(3000)
        expect(state).to_have_attribute("data-live-state", "held")  # the turns came and read nothing
        page.locator("h1").click()  # done typing, still not sent
        one_turn()
        assert len(requests) == 2, requests

        page.evaluate("""() => {
            Object.defineProperty(document, "visibilityState", {value: "hidden", configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
        }""")
        expect(state).to_have_attribute("data-live-state", "hidden")
        page.clock.run_for(10_000)
        expect(state).to_have_attribute("data-live-state", "hidden")
        with page.expect_request(lambda r: r.resource_type == "fetch", timeout=WAIT_MS):  # shown: read at once
            page.evaluate("""() => {
                Object.defineProperty(document, "visibilityState", {value: "visible", configurable: true});
                document.dispatchEvent(new Event("visibilitychange"));
            }""")
        expect(state).to_have_attribute("data-live-state", "waiting", timeout=WAIT_MS)
        assert requests == [("GET", address + "?q=led")] * 3, requests
        assert page.url == address + "?q=led" and page.evaluate("() => window.loadedOnce === true")
        assert page.input_value('input[name="q"]') == "ledxy"
        page.close()
    finally:
        server.terminate()
        server.wait(30)
