"""The dashboard from the backend URL alone: the fleet's jobs from the registry, drift side by side, /fleet."""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.testclient import TestClient

import anarchon_web
from anarchon import SyncGroups, SyncSchedules
from anarchon.groups import Place
from anarchon_conformance.testing import register_at
from anarchon_sqlite import SQLiteBackend
from anarchon_web import cli


def _register(url: str, instance: str, version: str, started_ms: int = 1_700_000_000_000, **crons: str) -> None:
    register_at(url, instance, crons, version=version, started_ms=started_ms)


def test_the_backend_alone_shows_the_fleet_jobs_and_their_drift(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fleet.db"
    _register(url, "i-7f", "1.4.2", 1_000, report="*/5 * * * * *", ping="* * * * * *")
    _register(url, "i-9c", "1.5.0", 2_000, report="* * * * * *", ping="* * * * * *")
    scheduler, _ = cli.build(cli.parser().parse_args(["--backend", url]))
    assert not scheduler.jobs
    with TestClient(anarchon_web.app(scheduler, open_backend=True, from_registry=True, backend_url=url)) as client:
        jobs = {j["name"]: j for j in client.get("/?format=json").json()["jobs"]}
        assert set(jobs) == {"ping", "report"}
        assert jobs["ping"]["drift"] is None
        drift = jobs["report"]["drift"]
        assert drift["fields"] == ["cron"] and len(drift["variants"]) == 2
        assert jobs["report"]["cron"] == "* * * * * *", "the newest definition (i-9c started last) is shown"
        by_cron = {v["values"]["cron"]: v for v in drift["variants"]}
        assert by_cron["* * * * * *"]["fingerprint"] == drift["running"]
        assert by_cron["*/5 * * * * *"]["instances"] == ["i-7f"]
        page = client.get("/").text
        assert "2 definitions" in page
        job_page = client.get("/jobs/report").text
        assert 'id="definitions"' in job_page and "*/5 * * * * *" in job_page and "i-7f" in job_page
        fleet = client.get("/fleet?format=json").json()
        assert [(i["instance"], i["version"]) for i in fleet["instances"]] == [("i-7f", "1.4.2"), ("i-9c", "1.5.0")]
        assert fleet["drifting"] == ["report"]
        assert "i-9c" in client.get("/fleet").text
        assert client.get("/jobs/nosuch").status_code == 404


def test_a_stored_schedule_is_listed_tagged_and_held_by_the_instances_with_its_task(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fleet.db"
    register_at(url, "i-7f", {"ping": "* * * * * *"}, tasks=("report",))
    register_at(url, "i-9c", {"ping": "* * * * * *"})
    SyncSchedules(url, by="ops").add("report-tenant-7", task="report", cron="0 7 * * *", timezone="Europe/Paris")
    scheduler, _ = cli.build(cli.parser().parse_args(["--backend", url]))
    with TestClient(anarchon_web.app(scheduler, open_backend=True, from_registry=True, backend_url=url)) as client:
        jobs = {j["name"]: j for j in client.get("/?format=json").json()["jobs"]}
        assert set(jobs) == {"ping", "report-tenant-7"}
        assert (jobs["report-tenant-7"]["stored"], jobs["ping"]["stored"]) == (True, False)
        assert jobs["report-tenant-7"]["timezone"] == "Europe/Paris"
        assert ">stored</span>" in client.get("/").text
        assert client.get("/jobs/report-tenant-7").status_code == 200


def test_the_fleet_page_shows_each_group_with_its_limit_runs_and_oldest_wait(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fleet.db"
    register_at(url, "i-7f", {"ping": "* * * * * *"})
    SyncGroups(url, by="ops").set("reports", 1)
    SyncGroups(url, by="ops").set("mail", 4)
    oldest = 1_700_000_000_000

    async def hold_one_and_queue_one() -> None:
        backend = SQLiteBackend(f"{tmp_path}/fleet.db")
        await backend.start()
        heart = backend.heart()
        assert heart is not None
        try:
            await heart.open()
            await heart.beat("i-7f", 60_000)  # a holder without a live heartbeat holds no place
            places = [Place("reports", "report", slot, False, f"t{slot}", "i-7f") for slot in (oldest, oldest + 1000)]
            assert await backend.places([], places) == [True, False]
        finally:
            await heart.close()
            await backend.close()

    asyncio.run(hold_one_and_queue_one())
    scheduler, _ = cli.build(cli.parser().parse_args(["--backend", url]))
    with TestClient(anarchon_web.app(scheduler, open_backend=True, from_registry=True, backend_url=url)) as client:
        groups = {g["name"]: g for g in client.get("/fleet?format=json").json()["groups"]}
        assert set(groups) == {"mail", "reports"}
        reports = groups["reports"]
        assert (reports["max_running"], reports["running"], reports["waiting"]) == (1, 1, 1)
        assert reports["oldest_waiting_ms"] == oldest + 1000 and reports["oldest_wait_ms"] > 0
        assert (groups["mail"]["running"], groups["mail"]["waiting"], groups["mail"]["oldest_wait_ms"]) == (0, 0, None)
        page = client.get("/fleet").text
        row = page[page.index('<tr data-group="reports">') :].split("</tr>")[0]
        assert "<td>1</td><td>1</td><td>1</td>" in row and " s</td>" in row, row
