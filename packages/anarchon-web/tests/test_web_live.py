"""The job page's charts over the history's time range, and what the live pages need from the server:
the script file, its policy, the refresh setting. Against real backends (SQLite file, Redis) holding a
history written through the backend API."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from starlette.testclient import TestClient

import anarchon_web
from anarchon import MemoryBackend, Scheduler
from anarchon_web import cli


def dashboard(store: Any, seeded: Any, fixed_clock: Any, **options: Any) -> TestClient:
    scheduler = Scheduler(store.backend(), clock=fixed_clock(seeded.now_ms))
    scheduler.add(seeded.job.name, seeded.job.cron, lambda: None)
    return TestClient(anarchon_web.app(scheduler, open_backend=True, **options))


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).replace(tzinfo=None).isoformat()


async def test_the_charts_cover_the_runs_in_the_range_and_none_outside(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    since, until = seeded.slot(2), seeded.slot(9)
    with dashboard(store, seeded, fixed_clock) as client:
        params = {"from": iso(since), "to": iso(until)}
        data = client.get("/jobs/ledger", params={**params, "format": "json"}).json()
        page = client.get("/jobs/ledger", params=params).text
        everything = client.get("/jobs/ledger", params={"format": "json"}).json()["charts"]
    charts = data["charts"]
    assert (charts["range"]["from_ms"], charts["range"]["to_ms"]) == (since, until)
    # slots 2 (timed out, 300 ms), 4 (400 ms), 5 (skipped), the manual run at 5:30 (500 ms), 9 (a catch-up, 600 ms)
    assert charts["runs"] == 5
    durations = [(p["slot_ms"], p["value_ms"]) for p in charts["durations"]["points"]]
    assert durations == [(seeded.slot(2), 300), (seeded.slot(4), 400), (seeded.manual_ms, 500), (seeded.slot(9), 600)]
    assert [p["slot_ms"] for p in charts["start_delays"]["points"]] == [seeded.slot(2), seeded.slot(4)]
    assert all(p["value_ms"] >= 0 for p in charts["start_delays"]["points"])
    counted: dict[str, int] = {}
    for bucket in charts["outcomes"]["buckets"]:
        assert since <= bucket["from_ms"] <= bucket["to_ms"] <= until
        for word, n in bucket["counts"].items():
            counted[word] = counted.get(word, 0) + n
    assert counted == {"timed-out": 1, "succeeded": 2, "skipped": 1, "caught-up": 1}
    # without a range: every record read, from the oldest slot to the newest
    assert everything["runs"] == 9 and everything["range"]["from_ms"] == seeded.slot(0)
    assert everything["range"]["to_ms"] == seeded.slot(11)
    assert [p["value_ms"] for p in everything["durations"]["points"]] == [100, 200, 300, 400, 500, 600, 700]
    # the page draws the same: one dot per run with a duration, none for a run outside the range
    section = page[page.index('id="live-charts"') : page.index("</section>", page.index('id="live-charts"'))]
    assert '<figure class="chart" id="chart-durations" data-count="4">' in section
    assert '<figure class="chart" id="chart-start-delays" data-count="2">' in section
    assert '<figure class="chart" id="chart-outcomes" data-count="5">' in section
    assert section.count("h0") == 6  # four durations and two delays
    bars = sum(len(bucket["bars"]) for bucket in charts["outcomes"]["buckets"])
    assert bars == 5 and section.count("<rect ") == bars  # one bar per outcome per bucket (14 s each here)
    assert 'role="img" aria-labelledby="chart-durations-title chart-durations-desc"' in section
    assert (
        "duration (ms)" in section and "slot (UTC)" in section and "start delay (s)" in section
    )  # an hour late: seeded now
    assert iso(seeded.slot(0))[:10] in page  # the range's words are on the page


async def test_the_pages_load_the_live_script_under_a_strict_policy(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    with dashboard(store, seeded, fixed_clock, refresh_s=7) as client:
        for path in ("/", "/jobs/ledger?status=failed"):
            page = client.get(path)
            policy = page.headers["content-security-policy"]
            assert "script-src 'self';" in policy and "connect-src 'self';" in policy and "default-src 'none'" in policy
            assert "unsafe" not in policy and "'unsafe-inline'" not in policy
            assert '<script src="/static/live.js" defer></script>' in page.text and page.text.count("<script") == 1
            assert '<body data-refresh-s="7">' in page.text
            assert 'id="live-now" data-live' in page.text
        script = client.get("/static/live.js")
        assert script.status_code == 200
        assert script.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
        assert script.headers["x-content-type-options"] == "nosniff"
        assert "data-refresh-s" in script.text and "visibilityState" in script.text and ".submit(" not in script.text
        run_page = client.get(f"/jobs/ledger/runs/{seeded.slot(1)}").text
        assert "<script" not in run_page and "data-refresh-s" not in run_page  # only the jobs and job pages


async def test_the_live_regions_keep_the_filter_forms_out(sqlite_store: Any, seed: Any, fixed_clock: Any) -> None:
    """live.js swaps only [data-live] elements: a form inside one would lose what the user typed."""
    seeded = await seed(sqlite_store)
    with dashboard(sqlite_store, seeded, fixed_clock) as client:
        for path in ("/?q=led", "/jobs/ledger?status=failed"):
            page = client.get(path).text
            assert len(_starts(page, " data-live")) >= 3, path
            forms = _starts(page, "<form")
            assert forms, path
            for start in _starts(page, " data-live"):
                tag = page.rindex("<", 0, start)
                name = page[tag + 1 : page.index(" ", tag)]
                end = _closing(page, tag, name)
                assert not any(tag < f < end for f in forms), (path, page[tag : tag + 80])


def _starts(text: str, needle: str) -> list[int]:
    out, at = [], text.find(needle)
    while at != -1:
        out.append(at)
        at = text.find(needle, at + 1)
    return out


def _closing(text: str, start: int, name: str) -> int:
    """Where the element opened at ``start`` closes (nesting of the same tag counted)."""
    depth, at = 0, start
    while True:
        opening, closing = text.find(f"<{name}", at + 1), text.find(f"</{name}>", at + 1)
        if opening != -1 and opening < closing:
            depth, at = depth + 1, opening
        elif depth:
            depth, at = depth - 1, closing
        else:
            return closing


def test_refresh_zero_turns_the_script_off_and_the_setting_is_checked() -> None:
    scheduler = Scheduler(MemoryBackend())
    scheduler.add("one", "* * * * *", lambda: None)
    with TestClient(anarchon_web.app(scheduler, refresh_s=0)) as client:
        for path in ("/", "/jobs/one"):
            text = client.get(path).text
            assert "<script" not in text and "data-refresh-s" not in text, path
            assert 'id="live-charts"' in text or path == "/"
        assert client.get("/jobs/one", params={"format": "json"}).json()["charts"]["runs"] == 0
    for bad in (-1, 3601, "5", True):
        with pytest.raises(ValueError, match="refresh_s"):
            anarchon_web.app(scheduler, refresh_s=bad)  # type: ignore[arg-type]
    assert cli.parser().parse_args(["--backend", "sqlite:///x.db", "--refresh-s", "0"]).refresh_s == 0
    assert cli.parser().parse_args(["--backend", "sqlite:///x.db"]).refresh_s == 5
