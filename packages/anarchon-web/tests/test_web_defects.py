"""Regressions of three defects found as a new user would, on real backends (SQLite and Redis).

* after one run-now the dashboard answered 500 on every page: ``run_now``
  closed the backend the dashboard had opened;
* a DNS-rebinding page reached the dashboard (``Host: rebind.evil.example``
  with a matching ``Origin`` ran a job) and links were built from the Host;
* Unicode digits in ``page``/``per_page`` answered 500 (or were read as ASCII).
"""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

import anarchon_web
from anarchon import Scheduler
from anarchon_web.cli import allowed_hosts

NEVER = "0 0 1 1 *"


def _scheduler(url: str) -> tuple[Scheduler, list[int]]:
    ran: list[int] = []
    scheduler = Scheduler(url, instance_id="dash")
    scheduler.add("tally", NEVER, lambda: ran.append(1))
    return scheduler, ran


TOKEN = "defects-test-token-0123456789"


def _token(client: TestClient) -> str:
    """Sign in with the token (through the form), then the job page's CSRF token."""
    form = re.search(r'name="csrf" value="([^"]+)"', client.get("/sign-in").text)
    assert form is not None
    signed = client.post("/sign-in", data={"csrf": form.group(1), "token": TOKEN}, follow_redirects=False)
    assert signed.status_code == 303, signed.text
    page = client.get("/jobs/tally")
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_pages_keep_answering_after_a_run_now(url: str) -> None:
    scheduler, ran = _scheduler(url)
    dashboard = anarchon_web.app(scheduler, token=TOKEN, open_backend=True)
    with TestClient(dashboard, base_url="http://127.0.0.1:8000") as client:
        token = _token(client)
        done = client.post("/jobs/tally/run-now", data={"csrf": token, "confirm": "yes"},
                           headers={"origin": "http://127.0.0.1:8000"},
                           follow_redirects=False)  # fmt: skip
        assert done.status_code == 303 and ran == [1]
        target = done.headers["location"]
        assert target.startswith("/jobs/tally/runs/"), f"the redirect is a path, not {target!r}"
        for path in ("/", "/jobs/tally", target, "/?format=json"):
            assert client.get(path).status_code == 200, f"{path} after a run-now"
        assert client.get("/jobs/tally?format=json").json()["runs"][0]["manual"] is True


def test_a_rebinding_host_is_refused_before_anything_runs(url: str) -> None:
    scheduler, ran = _scheduler(url)
    dashboard = anarchon_web.app(
        scheduler, token=TOKEN, open_backend=True, allowed_hosts=allowed_hosts("127.0.0.1", [])
    )
    with TestClient(dashboard, base_url="http://127.0.0.1:8000") as client:
        token = _token(client)
        evil = {"host": "rebind.evil.example:8000", "origin": "http://rebind.evil.example:8000"}
        assert client.get("/", headers=evil).status_code == 400
        for action in ("run-now", "trigger", "pause"):
            data = {"csrf": token, "confirm": "yes", "reason": "x"}
            posted = client.post(f"/jobs/tally/{action}", data=data, headers=evil, follow_redirects=False)
            assert posted.status_code == 400, f"a rebinding POST to {action} answered {posted.status_code}"
        assert ran == [] and scheduler.jobs["tally"] and client.get("/?format=json").json()["jobs"][0]["paused"] is None
        assert client.get("/", headers={"host": "localhost:8000"}).status_code == 200
        assert client.get("/", headers={"host": "[::1]:8000"}).status_code == 200


def test_links_are_not_built_from_the_host_header(url: str) -> None:
    scheduler, _ = _scheduler(url)
    for i in range(3):
        scheduler.add(f"more-{i}", NEVER, lambda: None)
    with TestClient(anarchon_web.app(scheduler, open_backend=True, per_page=2)) as client:  # no allow-list: mounted
        page = client.get("/", headers={"host": "rebind.evil.example"}).text
        assert "rebind.evil.example" not in page
        assert 'href="?page=2"' in page and 'href="?format=json"' in page


@pytest.mark.parametrize("value", ["%C2%B2", "%C2%B9", "%E2%91%A0", "%D9%A3"])  # ², ¹, ①, Arabic-Indic 3
@pytest.mark.parametrize("name", ["page", "per_page"])
def test_unicode_digits_are_a_clear_400_not_a_500(url: str, name: str, value: str) -> None:
    scheduler, _ = _scheduler(url)
    with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
        answer = client.get(f"/?{name}={value}&format=json")
        assert answer.status_code == 400
        body = answer.json()
        assert body["status"] == 400 and f"{name}=" in body["error"] and "integer" in body["error"]


def test_errors_answer_json_when_asked_and_the_page_links_home(url: str) -> None:
    scheduler, _ = _scheduler(url)
    with TestClient(anarchon_web.app(scheduler, open_backend=True), raise_server_exceptions=False) as client:
        missing = client.get("/no/such/route", headers={"accept": "application/json"})
        assert missing.status_code == 404 and missing.json() == {"error": "Not Found", "status": 404}
        page = client.get("/no/such/route")
        assert page.status_code == 404 and 'href="/"' in page.text and 'rel="stylesheet"' in page.text
        unknown = client.get("/jobs/nosuch?format=json")
        assert unknown.status_code == 404 and unknown.json()["status"] == 404


def test_a_failure_inside_answers_500_as_json_when_asked(url: str) -> None:
    scheduler, _ = _scheduler(url)

    async def broken(*_: object) -> list[object]:
        raise RuntimeError("the store broke")

    with TestClient(anarchon_web.app(scheduler, open_backend=True), raise_server_exceptions=False) as client:
        scheduler.backend.history = broken  # type: ignore[method-assign]
        answer = client.get("/jobs/tally", headers={"accept": "application/json"})
        assert answer.status_code == 500
        assert answer.json() == {"error": "the dashboard failed to answer; its log says why", "status": 500}
        assert "the store broke" not in client.get("/jobs/tally").text, "an internal error text reached the page"
