"""What ``min_replicas="auto"`` makes of ``pg_stat_replication`` as a role sees it (the rows of ``sql/*.sql``).

A role without ``pg_read_all_stats`` sees each standby's row with its state and positions NULL: grants
cannot wait for what it cannot read, so ``auto`` waits for none and says so, and the guarantee report
flags it; a standby that just connected streams before its first reply (flush position NULL) and is waited for.
"""

from __future__ import annotations

import logging

import pytest

from anarchon_postgres._guarantees import findings
from anarchon_postgres._standbys import StandbyWatch

SERVER = {"recovering": False, "fsync": "on", "full_page_writes": "on", "commit": "on", "names": "",
          "standbys": 1, "async": 1, "sync": 0, "hidden": 0}  # fmt: skip


def _failover(**row: object) -> tuple[bool, str, str | None]:
    (found,) = [f for f in findings({**SERVER, **row}, None) if f.topic == "failover"]
    return found.ok, found.detail, found.fix


def test_the_report_says_grants_wait_and_flags_a_standby_this_role_cannot_read() -> None:
    ok, detail, _ = _failover()
    assert ok and "min_replicas=auto" in detail
    ok, detail, fix = _failover(hidden=1, **{"async": 0})
    assert not ok and "cannot read" in detail and fix is not None and "pg_read_all_stats" in fix
    (waits,) = [f for f in findings(SERVER, 0) if f.topic == "failover"]
    assert not waits.ok and "min_replicas=0" in waits.detail


async def _watched(streaming: int, hidden: int) -> StandbyWatch:
    async def read() -> dict[str, object]:
        return {"streaming": streaming, "hidden": hidden, "timeline": "00000001"}

    watch = StandbyWatch("test")
    await watch.refresh(read)  # type: ignore[arg-type]
    return watch


async def test_auto_waits_for_a_streaming_standby_and_for_none_it_cannot_read(caplog: pytest.LogCaptureFixture) -> None:
    async def unread() -> None:
        raise AssertionError("read again within the watch period")

    assert (await _watched(1, 0)).wait_for(unread) == 1  # type: ignore[arg-type]
    assert (await _watched(0, 0)).wait_for(unread) == 0  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="anarchon.postgres"):
        hidden = await _watched(0, 1)
    assert hidden.wait_for(unread) == 0  # type: ignore[arg-type]
    assert "pg_read_all_stats" in caplog.text
