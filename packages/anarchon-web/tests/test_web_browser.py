"""The dashboard in a real headless Chromium, over a real fleet: three instance processes on a
fresh SQLite file, one killed with SIGKILL while it runs the slow job.

Chromium is Debian's (``apt-get install chromium``; ``.ci/run`` installs it),
driven by Playwright's Python package pointed at ``/usr/bin/chromium``:
``playwright install`` would download a browser of its own. Screenshots go
to ``test-artifacts/web/`` at the repository root (``ANARCHON_artifacts`` to
move it); the jobs page one is the README's picture.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from anarchon_conformance.fleet import Fleet

pytestmark = [pytest.mark.slow, pytest.mark.sqlite]


def test_the_take_over_after_a_kill_9_in_the_browser(
    tmp_path: Path, browser: Any, serve_web: Any, artifacts: Path
) -> None:
    database = tmp_path / "fleet.sqlite3"
    url = f"sqlite:///{database}"
    with Fleet(
        tmp_path / "fleet", backend=url, instances=3, jobs=3,
        options={"jitter_ms": 200, "lease_ms": 1500}, slow_cron="*/5 * * * * *", slow_seconds=3.0,
    ) as fleet:  # fmt: skip
        fleet.start()
        taken = fleet.take_over_after_kill("job-slow")
        victim, slot = taken.first["instance"], taken.first["slot"]
        # three more slow slots after it, so every strip has something to show
        fleet.wait_for(lambda r: r["e"] == "end" and r.get("job") == "job-slow" and r["slot"] >= slot + 15_000, 40)
        jobs = [f"{name}={'*/5 * * * * *' if name.endswith('slow') else '* * * * * *'}" for name in fleet.job_names()]
        server, address = serve_web(url, "--title", "demo fleet", *(f"--job={job}" for job in jobs))
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 560})  # type: ignore[attr-defined]
            page.goto(address)
            row = page.locator('tr[data-job="job-slow"]')
            mark = row.locator(f'a.cell[data-slot="{slot}"]')
            assert mark.get_attribute("data-outcome") == "taken-over"
            assert "attempt 2" in (mark.get_attribute("title") or "")
            assert victim not in (mark.get_attribute("title") or "")
            for name in fleet.job_names():
                cells = page.locator(f'tr[data-job="{name}"] .cell')
                assert cells.count() > 3, name
            assert page.locator('.cell[data-outcome="missed"]').count() == 0, "the fleet ran every slot"
            page.screenshot(path=str(artifacts / "jobs-page.png"), full_page=True)

            page.click('a.job:text-is("job-slow")')
            page.wait_for_url("**/jobs/job-slow")
            assert page.locator("h1").inner_text() == "job-slow"
            lanes = page.locator(".timeline .lane .who").all_inner_texts()
            assert victim not in lanes or lanes.count(victim) == 1
            assert int(page.locator("#success-rate").inner_text().split(".")[0]) >= 0
            page.screenshot(path=str(artifacts / "job-page.png"), full_page=True)

            page.locator(f'.timeline a.cell[data-slot="{slot}"]').click()
            page.wait_for_url(f"**/jobs/job-slow/runs/{slot}")
            assert page.locator("#run-attempt").inner_text().startswith("2")
            assert page.locator("#run-instance").inner_text() == taken.second["instance"] != victim
            assert "took the run over" in page.locator("#run-attempt").inner_text()
            page.screenshot(path=str(artifacts / "run-page.png"), full_page=True)
            page.close()
        finally:
            server.terminate()
            server.wait(30)
    assert (artifacts / "jobs-page.png").stat().st_size > 10_000
    if os.environ.get("ANARCHON_WEB_README_SHOT"):  # refresh the README's picture from this run
        shutil.copy(artifacts / "jobs-page.png", Path(__file__).resolve().parents[1] / "docs/jobs-page.png")
