"""The pages and their JSON, against real backends holding a history written through the backend API."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import anarchon_web
from anarchon import Scheduler


def dashboard(store: Any, seeded: Any, fixed_clock: Any, **options: Any) -> TestClient:
    scheduler = Scheduler(store.backend(), clock=fixed_clock(seeded.now_ms))
    scheduler.add(seeded.job.name, seeded.job.cron, lambda: None)
    scheduler.add("quiet", "*/5 * * * *", lambda: None, timezone="Europe/Athens")
    return TestClient(anarchon_web.app(scheduler, open_backend=True, **options))


async def test_the_strip_names_each_slot_s_outcome(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    with dashboard(store, seeded, fixed_clock) as client:
        data = client.get("/", params={"format": "json"}).json()
    assert [j["name"] for j in data["jobs"]] == ["ledger", "quiet"]
    ledger, quiet = data["jobs"]
    got = {(s["slot_ms"] - seeded.base_ms) // 60_000: s["outcome"] for s in ledger["strip"]}
    assert got == seeded.expected
    assert [s["slot_ms"] for s in ledger["strip"]] == sorted(s["slot_ms"] for s in ledger["strip"])
    taken = next(s for s in ledger["strip"] if s["outcome"] == "taken-over")
    assert (taken["instance"], taken["attempt"]) == ("i2", 2)
    assert ledger["last"]["status"] == "running" and ledger["last"]["slot_ms"] == seeded.slot(11)
    assert quiet["strip"] == [] and quiet["last"] is None
    # next slots: after now, in the job's zone and UTC, from the job's own slot math
    assert [n["slot_ms"] for n in ledger["next"]] == [seeded.slot(13), seeded.slot(14), seeded.slot(15)]
    assert all(n["local"].endswith(("EET", "EEST")) for n in quiet["next"])


async def test_the_jobs_page_draws_every_outcome_and_links_each_run(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    with dashboard(store, seeded, fixed_clock) as client:
        page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for outcome in set(seeded.expected.values()):
        assert f'data-outcome="{outcome}"' in page.text, outcome
    assert f'href="/jobs/ledger/runs/{seeded.slot(10)}"' in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe" not in policy  # one same-origin file: live.js
    assert page.text.count("<script") == 1 and '<script src="/static/live.js" defer></script>' in page.text


async def test_the_job_page_figures_and_filters(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    with dashboard(store, seeded, fixed_clock) as client:
        data = client.get("/jobs/ledger", headers={"accept": "application/json"}).json()
        assert data["read"] == 9 and data["total"] == 9
        figures = data["figures"]
        assert figures["ended"] == 7 and figures["succeeded"] == 5
        assert figures["success_rate"] == pytest.approx(5 / 7)
        assert figures["duration_ms"] == {"p50": 400, "p90": 700, "p99": 700, "max": 700}
        assert figures["take_overs"] == 1 and figures["catch_ups"] == 1
        assert data["instances"] == ["i1", "i2"]

        def slots(**params: str) -> list[int]:
            body = client.get("/jobs/ledger", params={**params, "format": "json"}).json()
            return [r["slot_ms"] for r in body["runs"]]

        assert slots(status="failed") == [seeded.slot(1)]
        assert slots(manual="yes") == [seeded.manual_ms]
        assert len(slots(manual="no")) == 8
        assert slots(instance="i2") == [seeded.slot(11), seeded.slot(10), seeded.manual_ms, seeded.slot(5)]
        assert slots(instance="i2", status="skipped") == [seeded.slot(5)]
        paged = client.get("/jobs/ledger", params={"per_page": "4", "page": "3", "format": "json"}).json()
        assert paged["pages"] == 3 and [r["slot_ms"] for r in paged["runs"]] == [seeded.slot(0)]
        lanes = {row["instance"]: row["cells"] for row in data["timeline"]["rows"]}
        assert set(lanes) == {"i1", "i2", "(no record)"}
        assert [c["outcome"] for c in lanes["i2"] if c] == ["skipped", "taken-over", "running"]


async def test_bad_filters_are_refused_with_what_to_send(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    with dashboard(store, seeded, fixed_clock) as client:
        for params, words in [
            ({"status": "exploded"}, "use one of running, succeeded"),
            ({"manual": "maybe"}, "use yes, no or any"),
            ({"instance": "i9"}, "instances: ['i1', 'i2']"),
            ({"page": "0"}, "page='0'"),
            ({"per_page": "x"}, "integer from 1"),
        ]:
            answer = client.get("/jobs/ledger", params={**params, "format": "json"})
            assert answer.status_code == 400 and words in answer.json()["error"], (params, answer.text)
        assert client.get("/?page=9").status_code == 400
        missing = client.get("/jobs/no-such-job")
        assert missing.status_code == 404 and "no job named" in missing.text


async def test_run_page_shows_the_take_over_and_the_manual_run(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    with dashboard(store, seeded, fixed_clock) as client:
        taken = client.get(f"/jobs/ledger/runs/{seeded.slot(10)}", params={"format": "json"}).json()["run"]
        assert (taken["attempt"], taken["instance"], taken["outcome"]) == (2, "i2", "taken-over")
        assert taken["fencing"] is not None
        assert [(a["attempt"], a["instance"]) for a in taken["earlier"]] == [(1, "i1")]  # the attempt that died
        page = client.get(f"/jobs/ledger/runs/{seeded.slot(10)}")
        assert "took the run over" in page.text and "died on i1" in page.text
        assert "attempt 1 died on i1" in client.get("/jobs/ledger").text
        manual = client.get(f"/jobs/ledger/runs/{seeded.manual_ms}", params={"manual": "yes", "format": "json"})
        assert manual.json()["run"]["manual"] is True
        assert client.get(f"/jobs/ledger/runs/{seeded.manual_ms}").status_code == 404  # not a scheduled slot
        assert client.get(f"/jobs/ledger/runs/{seeded.slot(3)}").status_code == 404  # missed: no record


async def test_everything_from_the_backend_is_escaped(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)
    with dashboard(store, seeded, fixed_clock) as client:
        for path in ["/jobs/ledger", f"/jobs/ledger/runs/{seeded.slot(1)}", "/jobs/ledger?status=failed"]:
            text = client.get(path).text
            assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; boom" in text, path
            assert "<script>" not in text
        reflected = client.get("/", params={"q": "<b>x</b>"}).text
        assert "<b>x</b>" not in reflected and "&lt;b&gt;x&lt;/b&gt;" in reflected


def test_backend_urls_are_shown_masked() -> None:
    from anarchon import MemoryBackend

    scheduler = Scheduler(MemoryBackend())
    scheduler.add("one", "* * * * *", lambda: None)
    url = "redis://ops:hunter2@cache.internal:6379/0?password=also-secret"
    with TestClient(anarchon_web.app(scheduler, backend_url=url)) as client:
        for path in ["/", "/?format=json", "/jobs/one", "/jobs/one?format=json"]:
            text = client.get(path).text
            assert "hunter2" not in text and "also-secret" not in text, path
            assert "ops:***@cache.internal" in text, path


def test_mounted_under_a_prefix_every_link_keeps_it() -> None:
    from anarchon import MemoryBackend

    scheduler = Scheduler(MemoryBackend())
    scheduler.add("one", "* * * * *", lambda: None)
    outer = Starlette(routes=[Mount("/cron", anarchon_web.app(scheduler))])
    with TestClient(outer) as client:
        page = client.get("/cron/")
        assert page.status_code == 200
        assert 'href="/cron/jobs/one"' in page.text and 'href="/cron/static/style.css"' in page.text
        assert client.get("/cron/static/style.css").status_code == 200
        assert client.get("/cron/jobs/one").status_code == 200


@pytest.mark.parametrize("bad", [{"per_page": 0}, {"strip_slots": "30"}, {"title": ""}, {"actions": "yes"}])
def test_bad_settings_fail_when_the_app_is_built(bad: dict[str, Any]) -> None:
    from anarchon import MemoryBackend

    with pytest.raises(ValueError, match=next(iter(bad))):
        anarchon_web.app(Scheduler(MemoryBackend()), **bad)


async def test_mounted_beside_a_scheduler_that_is_not_started_reads_through_it(store: Any, seed: Any) -> None:
    """Scheduler.history opens the backend around each call then (no lifespan of ours opened it)."""
    seeded = await seed(store)
    scheduler = Scheduler(store.backend())
    for i in range(8):
        scheduler.add(f"job-{i}", "* * * * *", lambda: None)
    scheduler.add("ledger", seeded.job.cron, lambda: None)
    with TestClient(anarchon_web.app(scheduler)) as client:
        data = client.get("/", params={"format": "json"}).json()
    ledger = next(j for j in data["jobs"] if j["name"] == "ledger")
    assert ledger["last"]["slot_ms"] == seeded.slot(11) and len(ledger["strip"]) == 30


async def test_the_job_page_shows_every_option_as_resolved(store: Any, seed: Any, fixed_clock: Any) -> None:
    """An operator reads retries, catch-up and take-over limits where they read the job's runs."""
    seeded = await seed(store)
    scheduler = Scheduler(store.backend(), clock=fixed_clock(seeded.now_ms))
    scheduler.add(seeded.job.name, seeded.job.cron, lambda: None)
    scheduler.add(
        "nightly",
        "0 3 * * *",
        lambda: None,
        retries=2,
        catch_up="each",
        catch_up_max=5,
        overlap="allow",
        max_takeovers=4,
    )
    with TestClient(anarchon_web.app(scheduler, open_backend=True)) as client:
        options = client.get("/jobs/nightly", params={"format": "json"}).json()["job"]["options"]
        assert {k: options[k] for k in ("retries", "catch_up", "catch_up_max", "max_takeovers", "dst")} == {
            "retries": 2,
            "catch_up": "each",
            "catch_up_max": 5,
            "max_takeovers": 4,
            "dst": "cron",
        }
        assert options["max_attempts"] == 5  # the backends' field, kept in the JSON for its readers
        page = client.get("/jobs/nightly").text
        section = page[page.index('id="options"') :]
        assert "<code>retries</code> 2" in section and "<code>catch_up</code> each" in section
        assert "<code>max_takeovers</code> 4" in section and "max_attempts" not in section.split("</div></div>")[0]


async def test_history_filters_by_a_time_range_and_refuses_a_bad_one(store: Any, seed: Any, fixed_clock: Any) -> None:
    seeded = await seed(store)

    def iso(ms: int, offset: str = "") -> str:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
        if offset:
            moment = moment.astimezone(timezone(timedelta(hours=int(offset[:3]))))
        return moment.replace(tzinfo=None).isoformat() + offset

    with dashboard(store, seeded, fixed_clock) as client:
        path = f"/jobs/{seeded.job.name}"
        every = client.get(path, params={"format": "json"}).json()["runs"]
        ranged = client.get(path, params={"format": "json", "from": iso(seeded.slot(2)), "to": iso(seeded.slot(9))})
        assert ranged.status_code == 200, ranged.text
        slots = [r["slot_ms"] for r in ranged.json()["runs"]]
        expected = [r["slot_ms"] for r in every if seeded.slot(2) <= r["slot_ms"] <= seeded.slot(9)]
        assert slots == expected and 0 < len(slots) < len(every), (slots, expected)
        shifted = client.get(path, params={"format": "json", "from": iso(seeded.slot(2), "+02:00")})
        assert [r["slot_ms"] for r in shifted.json()["runs"]] == [
            r["slot_ms"] for r in every if r["slot_ms"] >= seeded.slot(2)
        ]
        page = client.get(path, params={"from": iso(seeded.slot(2))}).text
        assert f'name="from" value="{iso(seeded.slot(2))}"' in page, "the filter's value is not kept on the page"
        for bad in ("yesterday", "2026-12-05T\u0661\u0664:00", "2026-13-01"):
            refused = client.get(path, params={"format": "json", "from": bad})
            assert refused.status_code == 400 and "from=" in refused.json()["error"], (bad, refused.text)
        backwards = client.get(path, params={"format": "json", "from": iso(seeded.slot(9)), "to": iso(seeded.slot(2))})
        assert backwards.status_code == 400 and "before from=" in backwards.json()["error"]
