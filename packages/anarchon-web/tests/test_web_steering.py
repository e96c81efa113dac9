"""Steering from the dashboard has its effect in the backend (a SQLite file and Redis), under the signed-in name.

Pause and resume are read back through ``Scheduler.pause_state``; a trigger
is run by a scheduler running in another thread, as a fleet instance; a
backfill's dry run lists the slots and changes nothing, then the real one
runs them; stored schedules are added, changed and removed. Each destructive
action answers a confirmation first and changes nothing until confirmed.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from starlette.testclient import TestClient

import anarchon_web
from anarchon import Scheduler
from anarchon.background import start_in_background

TOKEN = "steering-test-token-" + secrets.token_hex(8)
BASE = "http://127.0.0.1:8000"
NEVER = "0 0 1 1 *"


class Dash:
    """A signed-in browser of a dashboard whose scheduler has ``tally`` (its function counts its runs)."""

    def __init__(self, url: str, cron: str = NEVER) -> None:
        self.url, self.ran = url, []
        self.scheduler = Scheduler(url, instance_id="dash")
        self.scheduler.add("tally", cron, lambda: self.ran.append(1))
        app = anarchon_web.app(self.scheduler, open_backend=True, token=TOKEN, token_user="alice")
        self.client = TestClient(app, base_url=BASE)

    def __enter__(self) -> Dash:
        self.client.__enter__()
        page = self.client.get("/sign-in")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        done = self.client.post("/sign-in", data={"csrf": csrf, "token": TOKEN}, follow_redirects=False)
        assert done.status_code == 303
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__(*exc)

    def post(self, path: str, page: str = "/jobs/tally", **data: str) -> Any:
        form = self.client.get(page).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
        return self.client.post(path, data={"csrf": csrf, **data}, headers={"origin": BASE}, follow_redirects=False)

    def read(self, call: Callable[[Scheduler], Any]) -> Any:
        return asyncio.run(call(Scheduler(self.url, instance_id="reader")))


def test_pause_is_confirmed_then_stored_with_the_reason_and_the_name_and_resume_ends_it(url: str) -> None:
    with Dash(url) as dash:
        asked = dash.post("/jobs/tally/pause", reason="db <migration>")
        assert asked.status_code == 200 and 'id="confirm-form"' in asked.text
        assert "db &lt;migration&gt;" in asked.text and "<migration>" not in asked.text
        assert dash.read(lambda s: s.pause_state("tally")) is None, "the confirmation paused the job"
        assert dash.post("/jobs/tally/pause", reason="", confirm="yes").status_code == 400  # a reason is needed
        done = dash.post("/jobs/tally/pause", reason="db <migration>", confirm="yes")
        assert done.status_code == 303 and done.headers["location"] == "/jobs/tally"
        state = dash.read(lambda s: s.pause_state("tally"))
        assert state.paused and (state.by, state.reason) == ("alice", "db <migration>")
        listed = dash.client.get("/?format=json").json()["jobs"][0]["paused"]
        assert (listed["by"], listed["reason"]) == ("alice", "db <migration>")
        page = dash.client.get("/jobs/tally").text
        assert 'id="resume-form"' in page and 'id="pause-form"' not in page
        assert dash.post("/jobs/tally/resume", reason="done").status_code == 303
        assert not dash.read(lambda s: s.pause_state("tally")).paused
        assert dash.client.get("/jobs/tally?format=json").json()["paused"] is None


def test_a_trigger_is_run_by_the_fleet_not_by_the_dashboard(url: str) -> None:
    fleet_ran: list[int] = []
    fleet = Scheduler(url, instance_id="fleet-1")
    fleet.add("tally", NEVER, lambda: fleet_ran.append(1))
    running = start_in_background(fleet)
    try:
        with Dash(url) as dash:
            asked = dash.post("/jobs/tally/trigger", reason="by hand")
            assert asked.status_code == 200 and 'id="confirm-form"' in asked.text
            done = dash.post("/jobs/tally/trigger", reason="by hand", confirm="yes")
            assert done.status_code == 303
            deadline = time.monotonic() + 30
            while not fleet_ran:
                assert time.monotonic() < deadline, "no instance ran the triggered job"
                time.sleep(0.05)
            runs = running.history("tally")
            assert runs and runs[0].manual and runs[0].instance == "fleet-1"
            assert dash.ran == [], "the dashboard's process ran it"
    finally:
        running.stop()


def test_backfill_previews_the_slots_changing_nothing_then_runs_them(url: str) -> None:
    with Dash(url, cron="* * * * *") as dash:
        end = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=1)
        start = end - timedelta(minutes=4)
        span = {"from": start.strftime("%Y-%m-%dT%H:%M"), "to": end.strftime("%Y-%m-%dT%H:%M"), "reason": "outage"}
        preview = dash.post("/jobs/tally/backfill", **span)
        assert preview.status_code == 200 and 'id="confirm-form"' in preview.text
        assert re.search(r'id="count-would_run">5<', preview.text), preview.text
        assert start.isoformat() in preview.text and end.isoformat() in preview.text
        assert dash.ran == [] and dash.read(lambda s: s.history("tally")) == []
        done = dash.post("/jobs/tally/backfill", **span, confirm="yes")
        assert done.status_code == 200 and re.search(r'id="count-ran">5<', done.text), done.text
        assert len(dash.ran) == 5
        slots = sorted(r.slot_ms for r in dash.read(lambda s: s.history("tally")))
        assert slots == [int((start + timedelta(minutes=i)).timestamp() * 1000) for i in range(5)]
        again = dash.post("/jobs/tally/backfill", **span)
        assert re.search(r'id="count-would_run">0<', again.text) and re.search(r'id="count-already_run">5<', again.text)
        future = dash.post("/jobs/tally/backfill", **{**span, "to": "2999-01-01T00:00"})
        assert future.status_code == 409 and "in the future" in future.text
        assert dash.post("/jobs/tally/backfill", **{**span, "from": "yesterday"}).status_code == 400


def test_stored_schedules_are_added_changed_and_removed_by_the_signed_in_user(url: str) -> None:
    with Dash(url) as dash:
        added = dash.post("/schedules", page="/schedules", name="nightly", task="report", cron="0 2 * * *",
                          timezone="Europe/Athens", kwargs='{"tenant": 42}', reason="new report")  # fmt: skip
        assert added.status_code == 303, added.text
        (stored,) = dash.read(lambda s: s.schedules.list())
        assert (stored.task, stored.cron, stored.timezone, dict(stored.kwargs)) == (
            "report", "0 2 * * *", "Europe/Athens", {"tenant": 42}
        )  # fmt: skip
        assert stored.updated_by == "alice" and "nightly" in dash.client.get("/schedules").text
        bad = dash.post("/schedules", page="/schedules", name="bad", task="report", cron="not a cron")
        assert bad.status_code == 400 and "cron" in bad.text
        changed = dash.post("/schedules/nightly/set", page="/schedules", cron="0 3 * * *",
                            revision=str(stored.revision), reason="later")  # fmt: skip
        assert changed.status_code == 303 and dash.read(lambda s: s.schedules.get("nightly")).cron == "0 3 * * *"
        stale = dash.post("/schedules/nightly/set", page="/schedules", cron="0 4 * * *", revision=str(stored.revision))
        assert stale.status_code == 409, "a change against an old revision was written"
        asked = dash.post("/schedules/nightly/remove", page="/schedules", reason="retired")
        assert asked.status_code == 200 and 'id="confirm-form"' in asked.text
        assert [s.name for s in dash.read(lambda s: s.schedules.list())] == ["nightly"]
        done = dash.post("/schedules/nightly/remove", page="/schedules", reason="retired", confirm="yes")
        assert done.status_code == 303 and dash.read(lambda s: s.schedules.list()) == []
        log = dash.read(lambda s: s.schedules.log("nightly"))
        assert [(c.op, c.by, c.reason) for c in log] == [
            ("add", "alice", "new report"), ("set", "alice", "later"), ("remove", "alice", "retired")
        ]  # fmt: skip
