"""Sign-in and the refusals around it, on real backends (a SQLite file and Redis).

Token users sign in through the form (a signed, HttpOnly, SameSite=Strict
cookie) or send ``Authorization: Bearer``; a proxy's trusted header names
its users. Every POST needs the signed CSRF token and an Origin of this
dashboard; a rebinding Host is refused before anything runs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import secrets
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import anarchon_web
from anarchon import Scheduler
from anarchon_web import cli
from anarchon_web.cli import allowed_hosts

TOKEN = "signin-test-token-" + secrets.token_hex(8)
BASE = "http://127.0.0.1:8000"


def dashboard(url: str, **kw: object) -> TestClient:
    scheduler = Scheduler(url, instance_id="dash")
    scheduler.add("tally", "0 0 1 1 *", lambda: None)
    kw.setdefault("token", TOKEN)
    app = anarchon_web.app(scheduler, open_backend=True, allowed_hosts=allowed_hosts("127.0.0.1", []), **kw)  # type: ignore[arg-type]
    return TestClient(app, base_url=BASE)


def csrf(client: TestClient, path: str = "/sign-in") -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(path).text)
    assert found is not None, path
    return found.group(1)


def sign_in(client: TestClient, token: str = TOKEN, after: str = "/") -> object:
    return client.post("/sign-in", data={"csrf": csrf(client), "token": token, "next": after},
                       headers={"origin": BASE}, follow_redirects=False)  # fmt: skip


def pause_of(url: str) -> object:
    return asyncio.run(Scheduler(url, instance_id="reader").pause_state("tally"))


def test_sign_in_with_the_form_sets_a_signed_httponly_strict_cookie(url: str) -> None:
    with dashboard(url, token_user="alice") as client:
        first = client.get("/jobs/tally", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/sign-in?next=/jobs/tally"
        assert client.get("/?format=json").status_code == 401
        assert client.get("/static/style.css").status_code == 200  # the sign-in page's style is open
        wrong = sign_in(client, "not-the-token-at-all")
        assert wrong.status_code == 401 and "that is not this dashboard" in wrong.text  # type: ignore[attr-defined]
        assert "anarchon_session" not in client.cookies
        done = sign_in(client, after="/jobs/tally")
        assert done.status_code == 303 and done.headers["location"] == "/jobs/tally"  # type: ignore[attr-defined]
        cookie = done.headers["set-cookie"]  # type: ignore[attr-defined]
        assert "anarchon_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert "Max-Age=43200" in cookie and TOKEN not in cookie
        page = client.get("/jobs/tally")
        assert page.status_code == 200 and '<b id="signed-in">alice</b>' in page.text
        assert 'id="pause-form"' in page.text and 'href="/schedules"' in page.text

        session = client.cookies["anarchon_session"]
        payload, _, signature = session.partition(".")
        forged = base64.urlsafe_b64encode(json.dumps({"u": "root", "e": 2**40}).encode()).decode().rstrip("=")
        flipped = signature[:-2] + ("AA" if signature[-2:] != "AA" else "BB")
        for bad in (f"{payload}.{flipped}", f"{forged}.{signature}", payload, "x"):
            client.cookies.clear()
            client.cookies.set("anarchon_session", bad)
            assert client.get("/jobs/tally", follow_redirects=False).status_code == 303, f"cookie {bad!r} was taken"
            assert client.get("/?format=json").status_code == 401
        client.cookies.clear()
        client.cookies.set("anarchon_session", session)
        out = client.post(
            "/sign-out", data={"csrf": csrf(client, "/")}, headers={"origin": BASE}, follow_redirects=False
        )
        assert out.status_code == 303 and 'anarchon_session=""' in out.headers["set-cookie"]


def test_next_after_sign_in_stays_on_this_dashboard(url: str) -> None:
    with dashboard(url) as client:
        for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
            done = sign_in(client, after=target)
            assert done.headers["location"] == "/", target  # type: ignore[attr-defined]


def test_bearer_on_every_page_and_api_call_and_a_wrong_one_is_401(url: str) -> None:
    with dashboard(url, token_user="ci-bot") as client:
        good = {"authorization": f"Bearer {TOKEN}"}
        for path in ("/", "/jobs/tally", "/fleet", "/schedules?format=json"):
            assert client.get(path, headers=good).status_code == 200, path
        wrong = client.get("/?format=json", headers={"authorization": "Bearer " + TOKEN[:-1] + "x"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
        assert "Bearer token is not this dashboard's token" in wrong.json()["error"]
        assert sign_in(client).status_code == 303  # type: ignore[attr-defined]
        assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401, "the cookie outranked it"
        assert client.get("/", headers={"authorization": "Basic cHJveHk6cGFzcw=="}).status_code == 200  # a proxy's own
        # An API call with the header needs no CSRF token (a browser never adds the header cross-site).
        paused = client.post("/jobs/tally/pause", data={"reason": "from CI", "confirm": "yes"},
                             headers={**good, "accept": "application/json"})  # fmt: skip
        assert paused.status_code == 200 and paused.json()["paused"]["by"] == "ci-bot"
        state = pause_of(url)
        assert state is not None and state.by == "ci-bot" and state.reason == "from CI"  # type: ignore[attr-defined]


def test_posts_without_the_signed_token_or_from_elsewhere_are_refused(url: str) -> None:
    with dashboard(url) as client:
        assert sign_in(client).status_code == 303  # type: ignore[attr-defined]
        token = csrf(client, "/jobs/tally")
        yes = {"csrf": token, "reason": "r", "confirm": "yes"}
        refused = {
            "no token": client.post("/jobs/tally/pause", data={"reason": "r", "confirm": "yes"}),
            "cross-origin": client.post("/jobs/tally/pause", data=yes, headers={"origin": "http://evil.example"}),
            "cross-site": client.post("/jobs/tally/pause", data=yes, headers={"sec-fetch-site": "cross-site"}),
            "token of no user": client.post("/jobs/tally/pause", data={**yes, "csrf": csrf(client, "/sign-in")[:-3]}),
            "unsigned nonce": client.post("/jobs/tally/pause", data={**yes, "csrf": token.partition(".")[0] + ".00"}),
        }
        assert {k: r.status_code for k, r in refused.items()} == dict.fromkeys(refused, 403)
        evil = {"host": "rebind.evil.example:8000", "origin": "http://rebind.evil.example:8000"}
        assert client.post("/jobs/tally/pause", data=yes, headers=evil).status_code == 400
        assert pause_of(url) is None, "a refused POST paused the job"
        assert (
            client.post("/jobs/tally/pause", data=yes, headers={"origin": BASE}, follow_redirects=False).status_code
            == 303
        )
        assert pause_of(url) is not None


def test_a_proxy_s_trusted_header_names_the_user(url: str) -> None:
    with dashboard(url, token=None, trusted_header="X-Forwarded-User") as client:
        alice = {"x-forwarded-user": "alice@ops"}
        assert client.get("/", follow_redirects=False).status_code == 303
        assert "X-Forwarded-User" in client.get("/sign-in").text
        page = client.get("/jobs/tally", headers=alice)
        assert page.status_code == 200 and '<b id="signed-in">alice@ops</b>' in page.text
        token = re.search(r'id="pause-form">\s*<input type="hidden" name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        data = {"csrf": token, "reason": "disk full", "confirm": "yes"}
        as_bob = client.post("/jobs/tally/pause", data=data, headers={"x-forwarded-user": "bob"})
        assert as_bob.status_code == 403, "alice's form token worked for bob"
        done = client.post("/jobs/tally/pause", data=data, headers={**alice, "origin": BASE}, follow_redirects=False)
        assert done.status_code == 303
        state = pause_of(url)
        assert state is not None and state.by == "alice@ops" and state.reason == "disk full"  # type: ignore[attr-defined]
        assert client.get("/", headers={"authorization": "Bearer whatever", **alice}).status_code == 200


def test_settings_refused_with_the_fix(tmp_path: Path) -> None:
    scheduler = Scheduler("memory://")
    for kw, words in [
        ({"token": "short"}, "too short (5 characters): use at least 16"),
        ({"token_file": str(tmp_path / "none")}, "cannot be read"),
        ({"trusted_header": "X User"}, "is not a header name"),
        ({"token": TOKEN, "token_user": ""}, "token_user=''"),
        ({"token": TOKEN, "origins": ["cron.example.com"]}, "write scheme://host[:port]"),
    ]:
        with pytest.raises(ValueError, match=re.escape(words)):
            anarchon_web.app(scheduler, **kw)  # type: ignore[arg-type]
    (tmp_path / "token").write_text(TOKEN + "\n")
    with TestClient(anarchon_web.app(scheduler, token_file=str(tmp_path / "token"))) as client:
        assert client.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert TOKEN not in repr(anarchon_web.app(scheduler, token=TOKEN).state.settings)


def test_the_command_binds_beyond_localhost_only_with_sign_in_or_loudly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ANARCHON_WEB_TOKEN", raising=False)
    args = cli.parser().parse_args(["--backend", "memory://", "--host", "0.0.0.0", "--insecure-no-auth"])
    with caplog.at_level(logging.WARNING, logger="anarchon.web"):
        assert cli.sign_in(args) == {}
    assert "INSECURE" in caplog.text and "0.0.0.0" in caplog.text
    monkeypatch.setenv("ANARCHON_WEB_TOKEN", TOKEN)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        given = cli.sign_in(cli.parser().parse_args(["--backend", "memory://", "--host", "0.0.0.0"]))
    assert given["token"] == TOKEN and TOKEN not in caplog.text


def test_an_expired_cookie_is_refused_and_a_mounted_dashboard_keeps_its_prefix(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from anarchon_web._auth import configure

    scheduler = Scheduler(url, instance_id="dash")
    scheduler.add("tally", "0 0 1 1 *", lambda: None)
    outer = Starlette(routes=[Mount("/cron", anarchon_web.app(scheduler, token=TOKEN))])
    with TestClient(outer, base_url=BASE) as client:
        first = client.get("/cron/jobs/tally", follow_redirects=False)
        assert first.headers["location"] == "/cron/sign-in?next=/cron/jobs/tally"
        form = re.search(r'name="csrf" value="([^"]+)"', client.get("/cron/sign-in").text)
        done = client.post("/cron/sign-in", data={"csrf": form.group(1), "token": TOKEN, "next": "/cron/jobs/tally"},  # type: ignore[union-attr]
                           follow_redirects=False)  # fmt: skip
        assert done.headers["location"] == "/cron/jobs/tally" and "Path=/cron" in done.headers["set-cookie"]
        assert client.get("/cron/jobs/tally").status_code == 200
        same = configure(token=TOKEN, token_file=None, trusted_header=None, token_user="token", session_s=60)
        assert same is not None
        monkeypatch.setattr("time.time", lambda: 1_000_000.0)  # signed long ago: expired
        old = same.cookie("token")
        monkeypatch.undo()
        client.cookies.clear()
        client.cookies.set("anarchon_session", old)
        assert client.get("/cron/jobs/tally", follow_redirects=False).status_code == 303, "an expired cookie was taken"
        client.cookies.set("anarchon_session", same.cookie("token"))
        assert client.get("/cron/jobs/tally").status_code == 200, "a cookie of the same token signed anew is good"
