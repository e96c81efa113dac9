"""Actions: absent without sign-in; with it, only the dashboard's own form can run a job, once confirmed."""

from __future__ import annotations

import re

import pytest
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
        for action in ("run-now", "pause", "resume", "trigger", "backfill"):
            assert client.post(f"/jobs/tally/{action}", data={"csrf": "x"}).status_code in (404, 405)
        assert client.get("/sign-in").status_code == 404 and client.get("/schedules").status_code == 404
    assert ran == []


TOKEN = "actions-test-token-0123456789"


def test_actions_need_sign_in() -> None:
    scheduler, _ = scheduler_with_counter()
    with pytest.raises(ValueError, match=r"actions=True\) lets users .* needs sign-in: pass token=") as caught:
        anarchon_web.app(scheduler, actions=True)
    assert "ANARCHON_WEB_TOKEN" in str(caught.value)


def sign_in(client: TestClient, origin: str) -> None:
    page = client.get("/sign-in")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None, page.text
    done = client.post("/sign-in", data={"csrf": csrf.group(1), "token": TOKEN, "next": "/jobs/tally"},
                       headers={"origin": origin}, follow_redirects=False)  # fmt: skip
    assert done.status_code == 303 and done.headers["location"] == "/jobs/tally", done.text


def test_run_now_needs_the_form_s_token_from_this_site_and_a_confirmation() -> None:
    scheduler, ran = scheduler_with_counter()
    with TestClient(anarchon_web.app(scheduler, token=TOKEN), base_url="http://dash.test") as client:
        sign_in(client, "http://dash.test")
        page = client.get("/jobs/tally")
        token = re.search(r'id="run-now-form">\s*<input type="hidden" name="csrf" value="([^"]+)"', page.text).group(1)
        assert client.cookies.get("anarchon_csrf") == token.partition(".")[0]
        yes = {"csrf": token, "confirm": "yes"}
        refused = [
            client.post("/jobs/tally/run-now", data={"confirm": "yes"}),
            client.post("/jobs/tally/run-now", data={**yes, "csrf": token + "x"}),
            client.post("/jobs/tally/run-now", data=yes, headers={"sec-fetch-site": "cross-site"}),
            client.post("/jobs/tally/run-now", data=yes, headers={"origin": "http://evil.test"}),
            client.post("/jobs/tally/run-now", data=yes, headers={"origin": "null"}),
        ]
        assert [r.status_code for r in refused] == [403] * 5
        assert ran == []
        asked = client.post("/jobs/tally/run-now", data={"csrf": token}, headers={"origin": "http://dash.test"})
        assert asked.status_code == 200 and 'id="confirm-form"' in asked.text and ran == []
        done = client.post("/jobs/tally/run-now", data=yes, headers={"origin": "http://dash.test"},
                           follow_redirects=False)  # fmt: skip
        assert done.status_code == 303 and ran == [1]
        run = client.get(done.headers["location"] + "&format=json").json()["run"]
        assert run["manual"] is True and run["status"] == "succeeded"
        assert client.post("/jobs/nope/run-now", data=yes).status_code == 404
