"""The audit trail in the file: what the conformance suite cannot reach (the trim, ids after it, older files)."""

from __future__ import annotations

import sqlite3


def _entry(n: int) -> str:
    return f'{{"at_ms": {n}, "by": "t", "action": "pause", "job": "j", "reason": null, "detail": {{}}}}'


async def test_the_trail_keeps_the_newest_and_never_hands_an_id_out_again(instances, db_path):
    (backend,) = await instances(1)
    backend.audit_keep = 3
    ids = [await backend.audit_append("report", _entry(n)) for n in range(5)]
    assert [i for i, _ in await backend.audit_entries(limit=10)] == ids[:1:-1], "not the newest 3"
    with sqlite3.connect(db_path) as raw:  # every row gone (by hand): AUTOINCREMENT still goes on
        raw.execute("DELETE FROM anarchon_audit")
    raw.close()
    assert await backend.audit_append("report", _entry(9)) == ids[-1] + 1


async def test_a_file_from_before_the_trail_gains_its_table_when_opened(instances, db_path):
    (backend,) = await instances(1)
    await backend.close()
    with sqlite3.connect(db_path) as raw:  # the file as a release before the audit trail left it
        raw.execute("DROP TABLE anarchon_audit")
    raw.close()
    await backend.start()
    assert await backend.audit_entries(limit=5) == []
    entry_id = await backend.audit_append("report", _entry(1))
    assert await backend.audit_entries(limit=5, job="report") == [(entry_id, _entry(1))]
