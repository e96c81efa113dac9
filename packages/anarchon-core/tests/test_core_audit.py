"""The audit trail end to end: the CLI records who and why in a SQLite file, another process lists it.

The conformance suite's ``AuditTests`` hold every backend to the contract;
here: the command line (``--reason``, ``user@host``, ``anarchon audit``),
and that recording never fails nor undoes the action it records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from anarchon import MemoryBackend, MemoryStore, Scheduler, Schedules, read_audit, start_in_background
from anarchon._identity import default_actor
from anarchon._schedule_apply import apply_plan, load_file, plan
from anarchon.backend import Capabilities
from anarchon.cli import main


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_cli_action_is_recorded_and_another_process_lists_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'audit.sqlite3'}"
    b = ["--backend", url]
    for args in (
        ["pause", "report", "--force", "--reason", "db migration"],
        ["pause", "report", "--force", "--reason", "still migrating"],
        ["resume", "report", "--force", "--reason", "migrated"],
        ["trigger", "report", "--force", "--reason", "catch up"],
        ["schedules", "add", "t-1", "--task", "report", "--cron", "0 2 * * *", "--force", "--reason", "new"],
        ["schedules", "remove", "t-1", "--reason", "tenant left"],
    ):
        code, _, err = _cli(capsys, *args, *b)
        assert code == 0, f"{args}: {err}"
    # Another process reads the file: the trail is in the backend, not in this process.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    listing = subprocess.run(
        [sys.executable, "-m", "anarchon", "audit", "--json", *b],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr
    entries = json.loads(listing.stdout)
    who = default_actor()
    assert [(e["action"], e["job"], e["by"], e["reason"]) for e in entries] == [
        ("schedule-remove", "t-1", who, "tenant left"),
        ("schedule-add", "t-1", who, "new"),
        ("trigger", "report", who, "catch up"),
        ("resume", "report", who, "migrated"),
        ("pause", "report", who, "still migrating"),
        ("pause", "report", who, "db migration"),
    ], "each action once, newest first, the first pause not overwritten"
    ids = [e["id"] for e in entries]
    assert ids == sorted(ids, reverse=True)
    assert all(e["at"].endswith("Z") and isinstance(e["at_ms"], int) for e in entries)
    assert entries[1]["detail"]["changes"]["cron"] == [None, "0 2 * * *"]

    code, out, _ = _cli(capsys, "audit", "--job", "report", "--limit", "2", "--json", *b)
    assert [e["action"] for e in json.loads(out)] == ["trigger", "resume"]
    code, out, _ = _cli(capsys, "audit", "--job", "report", "--before", str(ids[3]), "--json", *b)
    assert [e["reason"] for e in json.loads(out)] == ["still migrating", "db migration"], "--before pages"
    code, out, _ = _cli(capsys, "audit", "--job", "report", "--limit", "1", *b)
    header, _, line = out.splitlines()
    assert header.split()[:5] == ["id", "when", "(UTC)", "by", "action"]
    assert f" {who} " in line and "trigger" in line and "catch up" in line
    code, out, _ = _cli(capsys, "audit", "--job", "nothing-here", *b)
    assert (code, out.strip()) == (0, "no audit entries for nothing-here")


def test_audit_refuses_a_backend_without_the_capability(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "audit", "--backend", "amqp://127.0.0.1:1/")
    if "not installed" in err:
        pytest.skip("anarchon-rabbitmq is not installed")
    assert code == 2 and "capability 'audit'" in err, err


class _NoTrail(MemoryBackend):
    capabilities: ClassVar[Capabilities] = dataclasses.replace(MemoryBackend.capabilities, audit=False)


class _BrokenTrail(MemoryBackend):
    async def audit_append(self, job: str, entry: str) -> int:
        raise ConnectionError("the trail's store went away")


async def test_a_backend_without_the_trail_still_pauses_and_records_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    scheduler = Scheduler(_NoTrail(store))
    with caplog.at_level(logging.DEBUG, logger="anarchon.audit"):
        state = await scheduler.pause("report", reason="quiet", by="ops")
    assert (state.paused, state.by) == (True, "ops")
    assert "keeps no audit trail" in caplog.text
    assert await read_audit(MemoryBackend(store)) == []


async def test_a_failed_append_warns_and_the_action_stands(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    scheduler = Scheduler(_BrokenTrail(store))
    with caplog.at_level(logging.WARNING, logger="anarchon.audit"):
        state = await scheduler.pause("report", reason="quiet", by="ops")
        request = await scheduler.trigger("report", by="ops")
    assert state.paused and request.job == "report"
    assert [p.job for p in store.control.pauses()] == ["report"], "the pause was undone"
    assert "was done but not recorded in the audit trail" in caplog.text
    assert "the trail's store went away" in caplog.text


async def test_apply_and_the_sync_face_record_with_their_by(tmp_path: Path) -> None:
    store = MemoryStore()
    path = tmp_path / "schedules.toml"
    path.write_text('[nightly]\ntask = "report"\ncron = "0 2 * * *"\n')
    async with Schedules(MemoryBackend(store), by="deploy-bot") as admin:
        todo = plan(load_file(path, admin), await admin.list(), prune=True)
        assert await apply_plan(admin, todo) == 1
    entries = await read_audit(MemoryBackend(store))
    assert [(e.action, e.job, e.by, e.reason) for e in entries] == [
        ("schedule-add", "nightly", "deploy-bot", "anarchon schedules apply")
    ]


def test_the_sync_face_passes_by_and_reason() -> None:
    store = MemoryStore()
    scheduler = Scheduler(MemoryBackend(store))
    thread = start_in_background(scheduler)
    try:
        thread.pause("report", reason="r1", by="web:alice")
        thread.resume("report", reason="r2", by="web:bob")
        thread.trigger("report", reason="r3", by="web:carol")
    finally:
        thread.stop()
    entries = asyncio.run(read_audit(MemoryBackend(store)))
    assert [(e.action, e.by, e.reason) for e in entries] == [
        ("trigger", "web:carol", "r3"),
        ("resume", "web:bob", "r2"),
        ("pause", "web:alice", "r1"),
    ]
