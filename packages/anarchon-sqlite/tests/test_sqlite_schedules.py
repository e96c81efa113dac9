"""Stored schedules in the file: what the conformance suite cannot reach (the host clock, older files)."""

from __future__ import annotations

import sqlite3

import pytest

from anarchon.errors import InvalidJobError, ScheduleConflictError
from anarchon.schedules import TOMBSTONE_MS
from anarchon_sqlite import SQLiteBackend

_TABLES = ("anarchon_schedules", "anarchon_schedule_log", "anarchon_schedule_counter")


async def test_old_tombstones_go_with_their_logs_and_the_counter_never_goes_back(instances):
    """The counter is a row: purging the tombstone that held the highest revision must not hand it out again."""
    (backend,) = await instances(1)
    now = [1_000_000_000_000]
    backend._clock = lambda: now[0]
    kept = await backend.put_schedule("kept", '{"n":1}', expect=0, change="add")
    rev = await backend.put_schedule("gone", '{"n":1}', expect=0, change="add")
    last = await backend.put_schedule("gone", None, expect=rev, change="remove")
    assert [r for _, _, r in await backend.schedules_since(kept)] == [last]

    now[0] += TOMBSTONE_MS  # not older than TOMBSTONE_MS yet: kept
    with pytest.raises(ScheduleConflictError):
        await backend.put_schedule("gone", None, expect=None, change="remove")
    assert await backend.schedule_log("gone") == [(rev, "add"), (last, "remove")]

    now[0] += 1  # now older: a refused change still purges it, as the reference store does
    with pytest.raises(ScheduleConflictError):
        await backend.put_schedule("gone", None, expect=None, change="remove")
    assert await backend.schedules_since(kept) == []
    assert await backend.schedule_log("gone") == []
    assert await backend.schedules_revision() == last, "a refused change moved the counter"
    again = await backend.put_schedule("gone", '{"n":2}', expect=0, change="add")
    assert again == last + 1, "a purged tombstone's revision was handed out again"
    assert await backend.schedule_log("gone") == [(again, "add")]


async def test_a_file_from_before_stored_schedules_gains_their_tables_when_opened(db_path):
    backend = SQLiteBackend(db_path)
    await backend.start()
    await backend.close()
    with sqlite3.connect(db_path) as raw:  # the file as a release before stored schedules left it
        for table in _TABLES:
            raw.execute(f"DROP TABLE {table}")
    raw.close()
    await backend.start()
    try:
        assert await backend.schedules_revision() == 0
        assert await backend.schedules_since(0) == []
        rev = await backend.put_schedule("nightly", "{}", expect=0, change="add")
        assert await backend.schedule("nightly") == ("{}", rev)
    finally:
        await backend.close()
    with sqlite3.connect(db_path) as raw:
        indexes = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    raw.close()
    assert {"anarchon_schedules_by_revision", "anarchon_schedules_tombstones"} <= indexes


async def test_a_bad_name_is_refused_before_anything_is_written(instances):
    (backend,) = await instances(1)
    with pytest.raises(InvalidJobError):
        await backend.put_schedule("no spaces; please", "{}", expect=0, change="add")
    assert await backend.schedules_revision() == 0
