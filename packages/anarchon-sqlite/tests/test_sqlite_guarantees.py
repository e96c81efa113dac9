"""The guarantee report of a SQLite file, and ``anarchon check`` printing it: tmpfs is named, a disk is not."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from anarchon.cli import main
from anarchon.guarantees import check_findings
from anarchon_sqlite import SQLiteBackend
from anarchon_sqlite._guarantees import LOW_SPACE_BYTES, file_findings

SHM = Path("/dev/shm")
tmpfs_only = pytest.mark.skipif(
    not SHM.is_dir() or not os.access(SHM, os.W_OK), reason="needs a writable tmpfs at /dev/shm (Linux)"
)


@pytest.fixture
def shm_path():
    path = SHM / f"anarchon-guarantees-{uuid.uuid4().hex[:8]}.sqlite3"
    yield path
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@tmpfs_only
async def test_a_file_on_tmpfs_is_named_with_its_fix(shm_path):
    backend = SQLiteBackend(shm_path)
    await backend.start()
    try:
        report = {f.topic: f for f in check_findings(await backend.guarantees())}
    finally:
        await backend.close()
    assert not report["storage"].ok and "on tmpfs: a reboot empties it" in report["storage"].detail
    assert "put the database file on a disk" in report["storage"].fix


async def test_a_file_on_a_local_disk_is_reported_safe(tmp_path):
    if any("tmpfs" in f.detail for f in file_findings(str(tmp_path / "x"), "normal")):
        pytest.skip("the temporary folder is on tmpfs here")
    backend = SQLiteBackend(tmp_path / "db.sqlite3", synchronous="full")
    await backend.start()
    try:
        report = {f.topic: f for f in check_findings(await backend.guarantees())}
    finally:
        await backend.close()
    assert all(f.ok for f in report.values()), report
    assert "synchronous=full" in report["durability"].detail


def test_little_free_space_is_named(tmp_path, monkeypatch):
    """A full disk is not made here: the free space is read through shutil.disk_usage, which the test answers."""
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=LOW_SPACE_BYTES - 1))
    (space,) = [f for f in file_findings(str(tmp_path / "db"), "normal") if f.topic == "space"]
    assert not space.ok and "every claim fails" in space.detail


@tmpfs_only
def test_check_warns_and_strict_fails_on_a_setting_that_can_run_a_slot_twice(shm_path, capsys):
    url = f"sqlite:///{shm_path}"
    assert main(["check", "--backend", url]) == 0
    out = capsys.readouterr().out
    assert "WARN   guarantee: storage: the file is on tmpfs" in out
    assert main(["check", "--backend", url, "--strict"]) == 1
    assert "FAILED guarantee: storage" in capsys.readouterr().out
    assert main(["check", "--backend", url, "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert [c["warning"] for c in checks if c["detail"].startswith("storage")] == [True]
