"""Stored schedules on the memory backend: tasks, the admin API's checks, and a fleet following changes."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from typing import Any

import pytest

from anarchon import (
    InvalidJobError,
    MemoryBackend,
    MemoryStore,
    RunContext,
    ScheduleConflictError,
    Scheduler,
    Schedules,
    SyncSchedules,
)
from anarchon.backend import Outcome
from anarchon.cli import main
from anarchon.fleet import read_fleet
from anarchon.schedules import FORGET_AFTER_MS, REUSE_AFTER_MS
from anarchon_conformance import finished_run, make_claim, make_job
from anarchon_conformance.testing import eventually, register_at

#: How long every instance may take to see a change: one poll (1 s ± 25 %) and the read.
SEEN_S = 1.6


def test_a_task_is_registered_in_each_form() -> None:
    s = Scheduler(MemoryBackend())

    def plain() -> None: ...

    s.task(plain)
    s.task(plain, name="alias")

    @s.task
    def decorated() -> None: ...

    @s.task(name="named")
    async def coroutine(ctx: RunContext) -> None: ...

    assert set(s.tasks) == {"plain", "alias", "decorated", "named"}
    assert s.tasks["named"] is coroutine
    with pytest.raises(ValueError, match="registered already"):
        s.task(decorated, name="plain")
    with pytest.raises(InvalidJobError, match="not allowed"):
        s.task(plain, name="no spaces")
    with pytest.raises(InvalidJobError, match="not callable"):
        s.task(42)  # type: ignore[call-overload]


async def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored() -> None:
    backend = MemoryBackend()
    async with Schedules(backend, by="ops@test") as schedules:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"cron": "61 * * * *"}, "cron"),
            ({"cron": "0 * * * *", "timezone": "Mars/Olympus"}, "timezone"),
            ({"cron": "0 * * * *", "kwargs": [1, 2]}, "kwargs"),
            ({"cron": "0 * * * *", "kwargs": {"not an identifier": 1}}, "kwargs"),
            ({"cron": "0 * * * *", "kwargs": {"x": float("nan")}}, "kwargs"),
            ({"cron": "0 * * * *", "options": {"max_late_ms": -5}}, "max_late_ms"),
            ({"cron": "0 * * * *", "options": {"no_such_option": 1}}, "options"),
        ]
        for fields, option in cases:
            with pytest.raises(InvalidJobError) as caught:
                await schedules.add("report", task="report", **fields)
            assert caught.value.option == option, (fields, caught.value)
        with pytest.raises(InvalidJobError, match="not allowed"):
            await schedules.add("bad name", task="report", cron="0 * * * *")
        assert await schedules.list() == []
        assert await backend.schedules_revision() == 0, "a refused change reached the backend"


async def test_changes_are_checked_against_the_revision_and_logged() -> None:
    async with Schedules(MemoryBackend(), by="ops@test") as schedules:
        first = await schedules.add("report", task="report", cron="0 2 * * *", kwargs={"tenant": 1}, reason="new")
        with pytest.raises(ScheduleConflictError, match="exists already"):
            await schedules.add("report", task="report", cron="0 3 * * *")
        second = await schedules.set("report", cron="0 3 * * *", timezone="Europe/Paris", if_revision=first.revision)
        assert (second.cron, second.timezone, dict(second.kwargs)) == ("0 3 * * *", "Europe/Paris", {"tenant": 1})
        with pytest.raises(ScheduleConflictError, match=f"at revision {second.revision}, not {first.revision}"):
            await schedules.set("report", cron="0 4 * * *", if_revision=first.revision)
        assert (await schedules.get("report")).cron == "0 3 * * *", "a refused change was written"
        await schedules.remove("report", reason="tenant left", by="alice@laptop")
        with pytest.raises(ScheduleConflictError, match="no stored schedule named 'report'"):
            await schedules.remove("report")
        log = await schedules.log("report")
        assert [c.op for c in log] == ["add", "set", "remove"]
        assert log[0].reason == "new" and log[0].by == "ops@test"
        assert log[1].changes == {"cron": ["0 2 * * *", "0 3 * * *"], "options.timezone": [None, "Europe/Paris"]}
        assert (log[2].by, log[2].reason) == ("alice@laptop", "tenant left")
        assert log[2].changes["cron"] == ["0 3 * * *", None]


def test_the_sync_face_works_from_plain_code(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    sync = SyncSchedules(url, by="script")
    sync.add("nightly", task="report", cron="0 2 * * *")
    assert [s.name for s in sync.list()] == ["nightly"]
    assert sync.set("nightly", cron="0 3 * * *").cron == "0 3 * * *"
    sync.remove("nightly")
    assert sync.list() == []


class Fleet:
    """Schedulers on one memory store, recording every run of every stored schedule."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.ran: Counter[tuple[str, int]] = Counter()
        self.runs: list[tuple[str, str, int, Any]] = []  # (instance, schedule, slot, tenant)
        self.members: list[Scheduler] = []

    async def start(self, n: int, *, with_task: bool = True) -> list[Scheduler]:
        started = []
        for _ in range(n):
            s = Scheduler(MemoryBackend(self.store))
            if with_task:

                def report(ctx: RunContext, tenant: int, _s: Scheduler = s) -> None:
                    self.ran[(ctx.job.name, ctx.slot_ms)] += 1
                    self.runs.append((_s.instance_id, ctx.job.name, ctx.slot_ms, tenant))

                s.task(report)
            await s.start()
            started.append(s)
        self.members += started
        return started

    async def stop(self) -> None:
        for s in self.members:
            await s.stop()


async def test_a_fleet_runs_each_slot_once_follows_changes_and_stops_after_removal() -> None:
    fleet = Fleet()
    a, b, c = await fleet.start(3)
    (bystander,) = await fleet.start(1, with_task=False)
    try:
        admin = a.schedules
        await admin.add("tenant-1", task="report", cron="* * * * * *", kwargs={"tenant": 1}, options={"jitter_ms": 0})
        await eventually(lambda: len({slot for _, _, slot, _ in fleet.runs}) >= 3, timeout_s=6, what="three slots")
        await admin.set("tenant-1", cron="*/2 * * * * *", kwargs={"tenant": 2})
        changed_ms = int(time.time() * 1000)
        await asyncio.sleep(SEEN_S + 3)
        await admin.remove("tenant-1")
        removed_ms = int(time.time() * 1000)
        await asyncio.sleep(SEEN_S + 1.5)
    finally:
        await fleet.stop()
    assert max(fleet.ran.values()) == 1, f"a slot ran twice: {[k for k, n in fleet.ran.items() if n > 1]}"
    assert bystander.instance_id not in {i for i, _, _, _ in fleet.runs}, "an instance without the task ran it"
    settled = [(slot, tenant) for _, _, slot, tenant in fleet.runs if changed_ms + SEEN_S * 1000 < slot]
    assert settled, "the changed schedule never ran"
    assert all(slot % 2000 == 0 and tenant == 2 for slot, tenant in settled), f"the old definition ran: {settled}"
    expected = set(range((int(changed_ms + SEEN_S * 1000) // 2000 + 1) * 2000, removed_ms - 2000, 2000))
    missing = expected - {slot for slot, _ in settled}
    assert not missing, f"slots {sorted(missing)} of the changed schedule did not run"
    late = [slot for _, _, slot, _ in fleet.runs if slot > removed_ms + SEEN_S * 1000]
    assert not late, f"slots {late} ran after the removal was seen"
    assert {i for i, _, _, _ in fleet.runs} <= {a.instance_id, b.instance_id, c.instance_id}


async def test_a_record_that_cannot_be_read_is_reported_once_and_the_others_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fleet = Fleet()
    backend = MemoryBackend(fleet.store)
    await backend.put_schedule("broken", "{not json", expect=0, change="{}")
    async with Schedules(backend) as admin:
        await admin.add("fine", task="report", cron="* * * * * *", kwargs={"tenant": 7}, options={"jitter_ms": 0})
    with caplog.at_level(logging.WARNING, logger="anarchon.schedules"):
        (s,) = await fleet.start(1)
        try:
            await eventually(lambda: any(n == "fine" for _, n, _, _ in fleet.runs), timeout_s=5, what="a run")
            await s._stored.poll()
        finally:
            await fleet.stop()
    reports = [r for r in caplog.records if "'broken'" in r.getMessage()]
    assert len(reports) == 1, [r.getMessage() for r in reports]
    assert "cannot be read" in reports[0].getMessage()


async def test_a_live_fleet_refuses_a_code_jobs_name_and_an_unknown_task() -> None:
    fleet = Fleet()
    (s,) = await fleet.start(1)
    s.add("nightly", "0 2 * * *", lambda: None)
    try:
        await eventually(
            lambda: any(j.name == "nightly" for j in s._fleetwatch.fleet.jobs()), timeout_s=5, what="the code job seen"
        )
        admin = s.schedules
        with pytest.raises(InvalidJobError, match="added in code"):
            await admin.add("nightly", task="report", cron="0 2 * * *")
        with pytest.raises(InvalidJobError, match="no live instance has the task 'export'"):
            await admin.add("t-9", task="export", cron="0 2 * * *")
        stored = await admin.add("t-9", task="export", cron="0 2 * * *", force=True)
        assert stored.revision > 0
        await admin.add("t-1", task="report", cron="0 3 * * *", timezone="Europe/Paris")
        view = await read_fleet(s.backend)
        assert view.stored == {"t-9", "t-1"}
        (job,) = [j for j in view.jobs() if j.name == "t-1"]
        assert job.instances == (s.instance_id,), "the views must show which live instances can run it"
        assert view.running(job).timezone == "Europe/Paris"
        assert "t-9" not in {j.name for j in view.jobs()}, "no live instance has its task: no holder to show"
    finally:
        await fleet.stop()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse refuses a bad argument by exiting 2
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_adds_changes_shows_logs_and_removes(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    b = ["--backend", f"sqlite:///{tmp_path / 'cli.sqlite3'}"]
    code, out, err = _cli(
        capsys, "schedules", "add", "t-42", "--task", "report", "--cron", "45\t*\t14\t*\t*",
        "--kwargs", '{"tenant": 42}', "--option", "max_late_ms=600000", "--reason", "signed up", "--json", *b,
    )  # fmt: skip
    assert code == 0, err
    added = json.loads(out)
    assert (added["kwargs"], added["options"], added["revision"]) == ({"tenant": 42}, {"max_late_ms": 600000}, 1)
    assert added["updated_by"].count("@") == 1, "the CLI records user@host"
    code, _, err = _cli(capsys, "schedules", "set", "t-42", "--cron", "0 9 * * *", "--if-revision", "7", *b)
    assert code == 2 and "at revision 1, not 7" in err
    code, out, err = _cli(capsys, "schedules", "set", "t-42", "--timezone", "Asia/Tokyo", "--if-revision", "1", *b)
    assert code == 0, err
    code, out, _ = _cli(capsys, "schedules", "list", "--json", *b)
    (row,) = json.loads(out)
    assert (row["name"], row["timezone"], row["revision"], row["instances"]) == ("t-42", "Asia/Tokyo", 2, 0)
    code, out, _ = _cli(capsys, "schedules", "list", *b)
    assert "no live instance has the task" in out
    code, out, _ = _cli(capsys, "schedules", "log", "t-42", "--json", *b)
    log = json.loads(out)
    assert [(e["op"], e["reason"]) for e in log] == [("add", "signed up"), ("set", None)]
    assert log[1]["changes"] == {"options.timezone": [None, "Asia/Tokyo"]}
    for bad, field in [(("--cron", "0 25 * * *"), "hour"), (("--kwargs", "[1]"), "JSON object"),
                       (("--timezone", "Nowhere/City"), "Nowhere/City")]:  # fmt: skip
        code, _, err = _cli(capsys, "schedules", "add", "t-43", "--task", "report", "--cron", "0 1 * * *", *bad, *b)
        assert code == 2 and field in err, err
    code, out, _ = _cli(capsys, "schedules", "remove", "t-42", *b)
    assert code == 0 and "removed 't-42'" in out
    code, _, err = _cli(capsys, "schedules", "show", "t-42", *b)
    assert code == 2 and "no stored schedule named 't-42'" in err
    code, out, _ = _cli(capsys, "schedules", "list", "--json", *b)
    assert json.loads(out) == []


FILE = """
["report-tenant-1"]
task = "report"
cron = "H 2 * * *"
timezone = "Europe/Paris"
kwargs = { tenant = 1 }

["report-tenant-2"]
task = "report"
cron = "0 3 * * *"
kwargs = { tenant = 2 }
options = { max_late_ms = 600000 }
"""

#: The file a later commit holds: tenant 1 dropped, tenant 2 moved to 03:30.
FILE_LATER = """
["report-tenant-2"]
task = "report"
cron = "30 3 * * *"
kwargs = { tenant = 2 }
options = { max_late_ms = 600000 }
"""


def test_apply_prints_the_diff_dry_runs_prunes_only_its_own_and_refuses_a_bad_file(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ["--backend", f"sqlite:///{tmp_path / 'apply.sqlite3'}"]
    SyncSchedules(b[1], by="ops").add("by-hand", task="report", cron="0 4 * * *")
    path = tmp_path / "schedules.toml"
    path.write_text(FILE)
    code, out, err = _cli(capsys, "schedules", "apply", str(path), "--dry-run", *b)
    assert code == 0, err
    assert "+ report-tenant-1: task=report cron='H 2 * * *' timezone=Europe/Paris" in out and "dry run" in out
    assert [s.name for s in SyncSchedules(b[1]).list()] == ["by-hand"], "a dry run changed something"
    code, out, err = _cli(capsys, "schedules", "apply", str(path), "--json", *b)
    assert code == 0, err
    assert [a["name"] for a in json.loads(out)["add"]] == ["report-tenant-1", "report-tenant-2"]
    code, out, _ = _cli(capsys, "schedules", "apply", str(path), *b)
    assert out.strip() == "no change", "applying the same file twice must change nothing"

    path.write_text(FILE_LATER)
    code, out, err = _cli(capsys, "schedules", "apply", str(path), "--prune", *b)
    assert code == 0, err
    assert "~ report-tenant-2 (revision" in out and 'cron: "0 3 * * *" -> "30 3 * * *"' in out
    assert "- report-tenant-1" in out and "by-hand" not in out, "prune removed a schedule apply did not write"
    assert sorted(s.name for s in SyncSchedules(b[1]).list()) == ["by-hand", "report-tenant-2"]

    before = SyncSchedules(b[1]).list()
    path.write_text('["ok"]\ntask = "report"\ncron = "0 1 * * *"\n\n["broken"]\ntask = "report"\ncron = "0 99 * * *"\n')
    code, _, err = _cli(capsys, "schedules", "apply", str(path), "--prune", *b)
    assert code == 2 and "schedule 'broken'" in err and "nothing was changed" in err, err
    assert SyncSchedules(b[1]).list() == before, "a file with one bad entry changed something"


def test_fleet_jobs_and_pause_know_stored_schedules(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'views.sqlite3'}"
    register_at(url, "i-1", {"ping": "* * * * * *"}, tasks=("report",))
    SyncSchedules(url).add("t-5", task="report", cron="0 5 * * *", kwargs={"tenant": 5})
    code, out, _ = _cli(capsys, "fleet", "--backend", url, "--json")
    assert code == 0 and json.loads(out)[0]["tasks"] == ["report"]
    code, out, _ = _cli(capsys, "jobs", "--backend", url, "--json")
    jobs = {j["name"]: j for j in json.loads(out)}
    assert (jobs["t-5"]["stored"], jobs["t-5"]["instances"], jobs["ping"]["stored"]) == (True, 1, False)
    code, _, err = _cli(capsys, "pause", "--backend", url, "t-5")
    assert code == 0, err


async def test_interval_and_one_time_schedules_through_the_api() -> None:
    async with Schedules(MemoryBackend(), by="ops@test") as schedules:
        added = await schedules.add("tick", task="report", every="90s")
        assert added.cron == "@every 90s"
        later = added.next_slot_ms(1_790_000_000_000)
        assert later is not None and later % 90_000 == 0
        with pytest.raises(InvalidJobError, match="exactly one of cron, every or at") as caught:
            await schedules.add("both", task="report", cron="0 * * * *", every="90s")
        assert caught.value.option == "cron"
        with pytest.raises(InvalidJobError, match="has no slot after now") as caught:
            await schedules.add("past", task="report", at="2020-01-01T00:00:00Z")
        assert caught.value.option == "at"
        changed = await schedules.set("tick", every="2m")
        assert changed.cron == "@every 2m"
        with pytest.raises(InvalidJobError, match="has no slot after now"):
            await schedules.set("tick", at="2020-01-01T00:00:00Z")
        assert (await schedules.get("tick")).revision == changed.revision, "a refused change was written"
        once = await schedules.set("tick", at="2999-01-01T00:00:00+01:00")
        assert (once.cron, await schedules.set("tick", kwargs={"tenant": 1}) is not None) == (
            "@at 2999-01-01T00:00:00+01:00",
            True,
        )
        assert [s.name for s in await schedules.list()] == ["tick"], "a refused add reached the backend"


async def test_a_fleet_runs_an_interval_on_its_grid_and_a_one_time_schedule_once() -> None:
    fleet = Fleet()
    a, _, _ = await fleet.start(3)
    try:
        at_ms = (int(time.time()) + 3) * 1000
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_ms / 1000))
        await a.schedules.add("every-2s", task="report", every="2s", kwargs={"tenant": 2}, options={"jitter_ms": 0})
        await a.schedules.add("once", task="report", at=at, kwargs={"tenant": 1})
        await eventually(lambda: ("once", at_ms) in fleet.ran, timeout_s=10, what="the one-time run")
        await eventually(lambda: sum(1 for j, _ in fleet.ran if j == "every-2s") >= 3, timeout_s=10, what="3 ticks")
        await asyncio.sleep(2.5)  # no event marks an absence: another instance's claim of "once" comes within 2 s
    finally:
        await fleet.stop()
    assert max(fleet.ran.values()) == 1, f"a slot ran twice: {[k for k, n in fleet.ran.items() if n > 1]}"
    assert [slot for job, slot in fleet.ran if job == "once"] == [at_ms]
    ticks = [slot for job, slot in fleet.ran if job == "every-2s"]
    assert all(slot % 2000 == 0 for slot in ticks), ticks


def test_the_cli_takes_every_and_at_and_list_shows_the_next_slot(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ["--backend", f"sqlite:///{tmp_path / 'fixed.sqlite3'}"]
    code, out, err = _cli(capsys, "schedules", "add", "tick", "--task", "report", "--every", "90s", "--json", *b)
    assert code == 0, err
    assert json.loads(out)["cron"] == "@every 90s"
    code, _, err = _cli(
        capsys, "schedules", "add", "x", "--task", "report", "--every", "90s", "--cron", "* * * * *", *b
    )
    assert code == 2 and "not allowed with argument" in err
    code, _, err = _cli(capsys, "schedules", "add", "x", "--task", "report", "--at", "2020-01-01T00:00:00Z", *b)
    assert code == 2 and "has no slot after now" in err
    code, _, err = _cli(capsys, "schedules", "set", "tick", "--at", "2999-12-24T18:00:00+01:00", *b)
    assert code == 0, err
    path = tmp_path / "fixed.toml"
    path.write_text(
        '["ran"]\ntask = "report"\nat = "2020-01-01T00:00:00Z"\n\n["grid"]\ntask = "report"\nevery = "15m"\n'
    )
    code, out, err = _cli(capsys, "schedules", "apply", str(path), *b)
    assert code == 0, err
    assert "+ grid: task=report cron='@every 15m'" in out, out
    code, out, _ = _cli(capsys, "schedules", "list", "--json", *b)
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["tick"]["next_slot"] == "2999-12-24T17:00:00Z" and rows["ran"]["next_slot"] is None
    code, out, _ = _cli(capsys, "schedules", "list", *b)
    assert "none (its time has passed)" in out
    path.write_text('["both"]\ntask = "report"\ncron = "0 1 * * *"\nevery = "1h"\n')
    code, _, err = _cli(capsys, "schedules", "apply", str(path), *b)
    assert code == 2 and "schedule 'both'" in err and "exactly one of cron, every or at" in err, err


async def test_a_removed_schedule_is_forgotten_by_the_first_change_after_half_a_tombstones_life() -> None:
    now = [1_790_000_000_000]
    store = MemoryStore(clock=lambda: now[0])
    backend = MemoryBackend(store)
    await backend.start()
    try:
        async with Schedules(backend, by="ops@test") as schedules:
            for name in ("gone", "reused"):
                await schedules.add(name, task="report", cron="* * * * * *")
            gone, reused = make_job(backend, "gone"), make_job(backend, "reused")
            for job in (gone, reused):
                (won,) = await backend.claim([make_claim(job, now[0], now_ms=now[0])])
                assert won.outcome is Outcome.WON and won.grant is not None
                await backend.finish(won.grant, finished_run(won.grant, finished_ms=now[0]))
            removed_ms = now[0]
            for name in ("gone", "reused"):
                await schedules.remove(name)
            # A code job of the name "reused" claims a slot well after the removal: the name is in use.
            slot = removed_ms + REUSE_AFTER_MS + 1000
            now[0] = slot
            (won,) = await backend.claim([make_claim(reused, slot, now_ms=slot)])
            assert won.outcome is Outcome.WON and won.grant is not None
            await backend.finish(won.grant, finished_run(won.grant, finished_ms=slot))

            now[0] = removed_ms + FORGET_AFTER_MS - 1
            await schedules.add("other", task="report", cron="0 * * * *")
            assert len(await backend.history("gone")) == 1, "forgotten before half the tombstone's life"
            assert [e.op for e in await schedules.log("gone")] == ["add", "remove"]

            now[0] = removed_ms + FORGET_AFTER_MS
            await schedules.set("other", cron="5 * * * *")
            assert await backend.history("gone") == [], "the removed schedule's runs outlived it"
            assert await schedules.log("gone") == [] and await schedules.log("reused") == []
            assert await backend.marks([gone]) == {"gone": None}
            assert len(await backend.history("reused")) == 2, "the state of a name in use again was dropped"
    finally:
        await backend.close()
