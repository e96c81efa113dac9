"""The fleet registry in the core: the policy, tolerant reading, drift warned once, and the CLI views."""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from anarchon import MemoryBackend, MemoryStore, Scheduler, hookimpl
from anarchon.cli import main
from anarchon.errors import InstanceIdInUseError
from anarchon.fleet import (
    Fleet,
    FleetJob,
    FleetReader,
    InstanceInfo,
    JobDefinition,
    decode_jobs,
    encode_jobs,
    jobs_fingerprint,
    winner,
)
from anarchon_conformance import eventually, make_job
from anarchon_conformance.testing import register_at, registry_entry

NEVER = "0 0 1 1 *"


def _definition(name: str, cron: str, **options: Any) -> JobDefinition:
    return JobDefinition.of(make_job(MemoryBackend(), name, cron, **options))


def _job(*holders: tuple[JobDefinition, tuple[str, ...]]) -> FleetJob:
    return FleetJob(holders[0][0].name, {d.fingerprint: (d, h) for d, h in holders})


# --- the policy ----------------------------------------------------------------------------------


def test_newest_picks_the_definition_whose_earliest_holder_started_last_oldest_the_other() -> None:
    old, new = _definition("report", "*/5 * * * * *"), _definition("report", "* * * * * *")
    # old pods a (t=1) and b (t=2); the new release's first pod c (t=3), then d (t=4).
    job = _job((old, ("a", "b")), (new, ("c", "d")))
    started = {"a": 1, "b": 2, "c": 3, "d": 4}
    assert winner(job, started, "newest") == new.fingerprint
    assert winner(job, started, "oldest") == old.fingerprint
    assert winner(job, started, "each") is None
    # A rollback: every old pod is gone, the new release's pods run, the old definition comes back on e.
    rollback = _job((new, ("c", "d")), (old, ("e",)))
    assert winner(rollback, {**started, "e": 5}, "newest") == old.fingerprint


def test_a_tie_is_broken_the_same_way_everywhere() -> None:
    one, two = _definition("job", "* * * * * *"), _definition("job", "*/2 * * * * *")
    forward, backward = _job((one, ("a",)), (two, ("b",))), _job((two, ("b",)), (one, ("a",)))
    started = {"a": 7, "b": 7}
    assert winner(forward, started, "newest") == winner(backward, started, "newest")
    assert winner(forward, started, "oldest") == winner(backward, started, "oldest")


def test_differences_name_the_fields_that_differ() -> None:
    a = _definition("job", "* * * * * *", timezone="Europe/Paris", jitter_ms=0)
    b = _definition("job", "*/2 * * * * *", jitter_ms=0)
    assert set(a.differences(b)) == {"cron", "timezone"}
    assert _job((a, ("x",)), (b, ("y",))).differing_fields() == ["cron", "timezone"]
    assert a.differences(_definition("job", "* * * * * *", timezone="Europe/Paris", jitter_ms=0)) == {}
    # The default jitter follows the schedule (a quarter of its shortest gap): it differs with it.
    assert set(_definition("job", "* * * * * *").differences(_definition("job", "*/2 * * * * *"))) == {
        "cron",
        "jitter_ms",
    }


def test_a_definition_survives_its_round_trip_with_the_same_fingerprint() -> None:
    d = _definition("job", "*/3 * * * * *", lease_ms=45_000, overlap="allow")
    (back,) = decode_jobs("i", encode_jobs([d])).values()  # type: ignore[union-attr]
    assert back == d


# --- tolerant reading ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "[]",
        json.dumps({"format": 99}),
        json.dumps({"format": 1, "instance": "i"}),
        json.dumps({"format": 1, "instance": "other", "host": "h", "pid": 1, "version": "", "started_ms": 1,
                    "jobs": 0, "jobs_fingerprint": "x"}),
    ],
)  # fmt: skip
def test_a_head_that_cannot_be_read_is_skipped_and_reported_once(raw: str, caplog: pytest.LogCaptureFixture) -> None:
    instance = f"bad-{abs(hash(raw))}"
    raw = raw.replace('"other"', json.dumps(instance + "-x"))
    with caplog.at_level(logging.DEBUG, "anarchon.fleet"):
        assert InstanceInfo.parse(instance, raw, None) is None
        assert InstanceInfo.parse(instance, raw, None) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and instance in warnings[0].getMessage()


def test_one_broken_definition_is_skipped_the_others_are_read() -> None:
    good = _definition("good", "* * * * * *")
    text = json.dumps(
        {"format": 1, "options": [dict(good.options)], "jobs": {"good": [good.cron, 0], "bad": [5, 0], "far": ["x", 9]}}
    )
    assert decode_jobs("mixed", text) == {"good": good}
    assert decode_jobs("whole", "{") is None
    assert decode_jobs("bomb", "z:" + "A" * 10) is None, "a compressed text that is not one is skipped"


def test_many_definitions_share_their_options_and_a_large_text_is_compressed() -> None:
    backend = MemoryBackend()
    definitions = [JobDefinition.of(make_job(backend, f"job-{i}", NEVER)) for i in range(10_000)]
    text = encode_jobs(definitions)
    assert text.startswith("z:") and len(text) < 200_000, f"{len(text):,} bytes for 10,000 jobs of one options set"
    assert decode_jobs("big", text) == {d.name: d for d in definitions}


# --- drift on a scheduler ----------------------------------------------------------------------------


class DriftSeen:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bool, str | None]] = []

    @hookimpl
    def anarchon_job_drift(self, scheduler: Scheduler, job: FleetJob, winner: str | None) -> None:
        self.calls.append((job.name, job.drift, winner))


async def test_drift_is_warned_once_per_change_and_settles_when_one_definition_is_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, seen = MemoryStore(), DriftSeen()
    a = Scheduler(MemoryBackend(store), instance_id="a", version="1.4.2", plugins=[seen])
    a.add("report", "*/5 * * * * *", lambda: None)
    a.add("only-a", NEVER, lambda: None)
    news = []
    with caplog.at_level(logging.INFO, "anarchon.fleet"):
        await a.start()
        try:
            for name in ("b", "c"):  # the new release, pod by pod: one change, then the same situation
                s = Scheduler(MemoryBackend(store), instance_id=name, version="1.5.0")
                s.add("report", "* * * * * *", lambda: None)
                await s.start()
                news.append(s)
                await eventually(lambda: "report" in a.superseded, timeout_s=3, what="a to yield 'report'")
                await a._fleetwatch.poll()
            assert "only-a" not in a.superseded, "a job only one instance defines is not drift"
            warnings = [
                r.getMessage()
                for r in caplog.records
                if r.levelno == logging.WARNING and getattr(r, "instance", None) == "a"
            ]
            assert len(warnings) == 1, warnings
            for new in ("b", "c"):  # the newest release never yields its own definition, not even at its start
                said = [r.getMessage() for r in caplog.records if getattr(r, "instance", None) == new]
                assert not any("another definition runs" in m for m in said), said
                assert len([m for m in said if "definitions among" in m]) <= 1, said
            assert "'report' has 2 definitions" in warnings[0] and "1.4.2" in warnings[0] and "1.5.0" in warnings[0]
            assert "the newest runs" in warnings[0]
            for s in news:
                await s.stop()
            await a._fleetwatch.poll()
            assert a.superseded == frozenset(), "the old definition must run again once it is the only one"
            assert any("one definition again" in r.getMessage() for r in caplog.records)
        finally:
            for s in news:
                await s.stop()
            await a.stop()
    assert [c[:2] for c in seen.calls] == [("report", True), ("report", False)]


async def test_with_drift_each_every_instance_keeps_claiming() -> None:
    store = MemoryStore()
    a = Scheduler(MemoryBackend(store), instance_id="a", drift="each")
    a.add("report", "*/5 * * * * *", lambda: None)
    b = Scheduler(MemoryBackend(store), instance_id="b")
    b.add("report", "* * * * * *", lambda: None)
    async with a, b:
        await a._fleetwatch.poll()
        view = await a.fleet()
        (job,) = view.jobs()
        assert job.drift and a.superseded == frozenset()


async def test_an_instance_id_held_by_a_live_instance_on_another_host_is_refused() -> None:
    store = MemoryStore()
    other = InstanceInfo("web-1", "another-host", 1, "1.0", 1, 0, jobs_fingerprint([]))
    await MemoryBackend(store).register("web-1", other.head(), encode_jobs([]))
    s = Scheduler(MemoryBackend(store), instance_id="web-1")
    with pytest.raises(InstanceIdInUseError, match="held by a live instance on host 'another-host'"):
        await s.start()
    assert not s.started
    assert "web-1" not in store._alive, "the refused instance beat (or left) under the live instance's id"
    mine = InstanceInfo("web-2", socket.gethostname(), os.getpid(), "1.0", 1, 0, jobs_fingerprint([]))
    await MemoryBackend(store).register("web-2", mine.head(), encode_jobs([]))
    async with Scheduler(MemoryBackend(store), instance_id="web-2"):  # its own earlier entry: replaced
        pass


def test_bad_version_and_drift_are_refused_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="drift='latest' is not a drift policy: use 'newest'"):
        Scheduler("memory://", drift="latest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="version='a\\\\nb' is not allowed"):
        Scheduler("memory://", version="a\nb")
    monkeypatch.setenv("ANARCHON_VERSION", "2026.12.1")
    assert Scheduler("memory://").version == "2026.12.1"
    assert Scheduler("memory://", version="v9").version == "v9"


def test_fleet_sync_reads_without_an_event_loop() -> None:
    s = Scheduler("memory://")
    assert s.fleet_sync() == Fleet()


# --- the CLI views -------------------------------------------------------------------------------------


def _register(url: str, instance: str, version: str, started_ms: int = 1_700_000_000_000, **crons: str) -> None:
    register_at(url, instance, crons, version=version, started_ms=started_ms)


def test_fleet_and_jobs_from_the_backend_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/fleet.db"
    _register(url, "i-7f", "1.4.2", report="*/5 * * * * *", ping="* * * * * *")
    _register(url, "i-9c", "1.5.0", report="* * * * * *", ping="* * * * * *")
    assert main(["fleet", "--backend", url, "--json"]) == 0
    fleet = json.loads(capsys.readouterr().out)
    assert [(i["instance"], i["version"], i["jobs"]) for i in fleet] == [("i-7f", "1.4.2", 2), ("i-9c", "1.5.0", 2)]
    assert main(["jobs", "--backend", url, "--json"]) == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)}
    assert set(jobs) == {"ping", "report"}
    assert (jobs["ping"]["instances"], jobs["ping"]["definitions"]) == (2, 1)
    assert (jobs["report"]["instances"], jobs["report"]["definitions"]) == (2, 2)
    assert jobs["report"]["differing_fields"] == ["cron"]
    for key in ("name", "cron", "timezone", "instances", "definitions", "paused", "next_slot", "last_run"):
        assert key in jobs["report"]
    assert jobs["report"]["paused"] is False and jobs["report"]["last_run"] is None
    assert main(["jobs", "--backend", url]) == 0
    table = capsys.readouterr().out
    assert "2 (differ: cron)" in table
    assert main(["fleet", "--backend", url]) == 0
    assert "i-9c" in capsys.readouterr().out


def test_pause_trigger_and_history_refuse_a_job_no_live_instance_defines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/fleet.db"
    _register(url, "i-1", "1.0", ping="* * * * * *")
    for command in (["pause"], ["trigger"], ["history"]):
        assert main([*command, "--backend", url, "pingg"]) == 2
        err = capsys.readouterr().err
        assert "no live instance defines a job named 'pingg'" in err and "ping" in err
    assert main(["pauses", "--backend", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [], "a refused pause was stored"
    assert main(["pause", "--backend", url, "ping"]) == 0
    capsys.readouterr()
    assert main(["pause", "--backend", url, "later", "--force"]) == 0
    capsys.readouterr()
    assert main(["resume", "--backend", url, "later"]) == 0, "a stored pause can be resumed by name"


async def test_the_reader_reads_an_instance_definitions_again_only_when_they_change() -> None:
    store = MemoryStore()
    backend = MemoryBackend(store)
    asked: list[list[str]] = []
    read_jobs = backend.registered_jobs

    async def counted(instances: Any) -> dict[str, str]:
        asked.append(sorted(instances))
        return await read_jobs(instances)

    backend.registered_jobs = counted  # type: ignore[method-assign]
    await backend.register("a", *registry_entry(backend, "a", {"one": NEVER}))
    await backend.register("b", *registry_entry(backend, "b", {"one": NEVER}))
    reader = FleetReader()
    assert sorted((await reader.read(backend)).definitions) == ["a", "b"]
    assert (await reader.read(backend)).definitions["b"]["one"].cron == NEVER
    await backend.register("b", *registry_entry(backend, "b", {"one": NEVER, "two": NEVER}))
    assert sorted((await reader.read(backend)).definitions["b"]) == ["one", "two"]
    await backend.unregister("a")
    assert list((await reader.read(backend)).definitions) == ["b"]
    assert asked == [["a", "b"], ["b"]], "definitions were read again without a change"


async def test_a_job_added_or_removed_on_a_running_instance_reaches_the_registry() -> None:
    store = MemoryStore()
    s = Scheduler(MemoryBackend(store), instance_id="live")
    s.add("first", NEVER, lambda: None)
    async with s:
        reader = MemoryBackend(store)

        async def jobs_are(*expected: str) -> bool:
            view = await FleetReader().read(reader)
            return sorted(view.definitions.get("live", {})) == list(expected)

        assert await jobs_are("first")
        s.add("second", NEVER, lambda: None)
        await eventually(lambda: jobs_are("first", "second"), timeout_s=3, what="the added job in the registry")
        s.remove("first")
        await eventually(lambda: jobs_are("second"), timeout_s=3, what="the removed job gone from the registry")
