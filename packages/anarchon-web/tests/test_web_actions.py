"""Actions: absent unless turned on; with them on, only the dashboard's own form can run a job."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

import anarchon_web
from anarchon import MemoryBackend, Scheduler


def scheduler_with_counter() -> tuple[Scheduler, list[int]]:
    ran: list[int] = []
    scheduler = Scheduler(MemoryBackend())
    scheduler.add("tally", "0 0 1 1 *", lambda: ran.append(1))
    return scheduler, ran


def test_read_only_by_default_there_is_no_form_and_no_route() -> None:
    scheduler, ran = scheduler_with_counter()
    with TestClient(anarchon_web.app(scheduler)) as client:
        page = client.get("/jobs/tally")
        assert '<form method="post"' not in page.text and "anarchon_csrf" not in page.headers.get("set-cookie", "")
        assert client.post("/jobs/tally/run-now", data={"csrf": "x"}).status_code in (404, 405)
    assert ran == []


def test_run_now_needs_the_form_s_token_from_this_site() -> None:
    scheduler, ran = scheduler_with_counter()
    with TestClient(anarchon_web.app(scheduler, actions=True), base_url="http://dash.test") as client:
        page = client.get("/jobs/tally")
        token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        assert client.cookies.get("anarchon_csrf") == token
        refused = [
            client.post("/jobs/tally/run-now", data={}),
            client.post("/jobs/tally/run-now", data={"csrf": token + "x"}),
            client.post("/jobs/tally/run-now", data={"csrf": token}, headers={"sec-fetch-site": "cross-site"}),
            client.post("/jobs/tally/run-now", data={"csrf": token}, headers={"origin": "http://evil.test"}),
            client.post("/jobs/tally/run-now", data={"csrf": token}, headers={"origin": "null"}),
        ]
        assert [r.status_code for r in refused] == [403] * 5
        assert ran == []
        done = client.post("/jobs/tally/run-now", data={"csrf": token}, headers={"origin": "http://dash.test"},
                           follow_redirects=False)  # fmt: skip
        assert done.status_code == 303 and ran == [1]
        run = client.get(done.headers["location"] + "&format=json").json()["run"]
        assert run["manual"] is True and run["status"] == "succeeded"
        assert client.post("/jobs/nope/run-now", data={"csrf": token}).status_code == 404
