"""Stored schedules on NATS: the stream they live in, one message per change, and what the CAS must refuse.

The contract itself (revisions, conflicts, races, the log, a fleet following
changes) is the conformance suite's (``ScheduleStoreTests``,
``StoredScheduleFleetTests``); these check what is particular to this backend.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import StorageType
from nats_helpers import Cluster

import anarchon_nats._schedules as schedules_module
from anarchon.errors import ScheduleConflictError
from anarchon.schedules import LOG_KEEP
from anarchon_nats import NatsBackend
from anarchon_nats._names import schedule_subject, schedules_stream

pytestmark = pytest.mark.nats


def _record(cron: str) -> str:
    return json.dumps({"format": 1, "task": "t", "cron": cron, "kwargs": {}, "options": {}})


@pytest.fixture
async def drop_schedules(nats_url: str) -> AsyncIterator[list[str]]:
    """Schedules streams (names) the test made; deleted afterwards."""
    made: list[str] = []
    yield made
    nc = await nats.connect(nats_url)
    try:
        for name in made:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await nc.jetstream().delete_stream(name)
    finally:
        await nc.close()


async def test_a_namespace_gets_a_stream_of_its_own_made_by_the_first_change(
    backends, names, client: Client, drop_schedules: list[str]
) -> None:
    (a,) = await backends(1)
    (other,) = await backends(1, prefix=f"other{names.prefix}")
    ours, theirs = schedules_stream(names.stream, names.prefix), schedules_stream(names.stream, other.prefix)
    drop_schedules.extend([ours, theirs])
    assert ours != theirs
    js = client.jetstream()

    assert await a.schedules_revision() == 0
    assert await a.schedules_since(0) == []
    assert await a.schedule("x") is None
    assert await a.schedule_log("x") == []
    with pytest.raises(nats.js.errors.NotFoundError):
        await js.stream_info(ours)  # a look never creates it

    rev = await a.put_schedule("x", _record("0 * * * *"), expect=0, change='{"op":"add"}')
    assert rev == 1, "the counter is the stream's sequence, from 1"
    config = (await js.stream_info(ours)).config
    assert config.subjects == [f"$ANARCHON.{ours}.>"]
    assert config.storage == StorageType.FILE
    assert config.max_msgs_per_subject == LOG_KEEP
    assert config.num_replicas == 1

    stored = await js.get_msg(ours, subject=schedule_subject(names.stream, names.prefix, "x"))
    assert stored.seq == rev
    assert json.loads(stored.data or b"") == {"v": 1, "record": _record("0 * * * *"), "change": '{"op":"add"}'}, (
        "record and log entry are one message"
    )

    assert await other.schedules_revision() == 0, "another prefix shares the counter"
    assert await other.schedule("x") is None
    assert await other.put_schedule("x", _record("5 * * * *"), expect=0, change="{}") == 1
    assert await a.schedule("x") == (_record("0 * * * *"), rev)


async def test_a_removals_revision_is_never_taken_for_a_live_one(backends, names, drop_schedules) -> None:
    """The stream checks sequences only; the backend must refuse a change over a tombstone's revision itself."""
    a, b = await backends(2)
    drop_schedules.append(schedules_stream(names.stream, names.prefix))
    added = await a.put_schedule("x", _record("0 * * * *"), expect=0, change="{}")
    assert await a.schedule("x") == (_record("0 * * * *"), added)  # a now knows `added` as live
    gone = await b.put_schedule("x", None, expect=added, change='{"op":"remove"}')
    for inst in (a, b):
        for expect in (gone, added):
            for record in (_record("1 * * * *"), None):
                with pytest.raises(ScheduleConflictError) as refused:
                    await inst.put_schedule("x", record, expect=expect, change="{}")
                assert refused.value.current == 0, (inst, expect, record)
        with pytest.raises(ScheduleConflictError):
            await inst.put_schedule("x", None, expect=None, change="{}")
    assert await a.schedules_revision() == gone, "a refused change was written"
    assert [rev for rev, _ in await b.schedule_log("x")] == [added, gone]

    again = await b.put_schedule("x", _record("2 * * * *"), expect=0, change="{}")
    with pytest.raises(ScheduleConflictError) as stale:
        await a.put_schedule("x", _record("3 * * * *"), expect=added, change="{}")
    assert stale.value.current == again
    assert await a.put_schedule("x", None, expect=None, change="{}") > again


async def test_old_tombstones_go_with_their_logs_and_a_schedule_added_again_stays(
    backends, names, monkeypatch: pytest.MonkeyPatch, drop_schedules
) -> None:
    (a,) = await backends(1)
    drop_schedules.append(schedules_stream(names.stream, names.prefix))
    kept = await a.put_schedule("kept", _record("0 * * * *"), expect=0, change="{}")
    gone = await a.put_schedule("gone", _record("0 * * * *"), expect=0, change="{}")
    gone = await a.put_schedule("gone", None, expect=gone, change="{}")
    back = await a.put_schedule("back", _record("0 * * * *"), expect=0, change="{}")
    back_removed = await a.put_schedule("back", None, expect=back, change="{}")
    back = await a.put_schedule("back", _record("1 * * * *"), expect=0, change="{}")
    assert [name for name, _, _ in await a.schedules_since(kept)] == ["gone", "back"]

    monkeypatch.setattr(schedules_module, "TOMBSTONE_MS", -60_000)  # every tombstone counts as old
    assert await a.schedules_since(0) == [("kept", _record("0 * * * *"), kept), ("back", _record("1 * * * *"), back)]
    assert await a.schedule_log("gone") == [], "an old tombstone's log stays"
    assert [name for name, _, _ in await a.schedules_since(kept)] == ["back"]
    assert [rev for rev, _ in await a.schedule_log("back")][-2:] == [back_removed, back]

    # A reader that saw a tombstone purges only up to it: the schedule added again meanwhile stays.
    await a.put_schedule("back", None, expect=back, change="{}")
    tombstone = await a.schedules_since(back)
    again = await a.put_schedule("back", _record("2 * * * *"), expect=0, change="{}")
    [(name, record, rev)] = tombstone
    assert record is None
    await a._purge_tombstones([schedules_module._Change(name, rev, None, "{}", 0)])
    assert await a.schedule("back") == (_record("2 * * * *"), again)
    assert await a.schedule_log("back") == [(again, "{}")]
    assert await a.schedules_revision() == again, "a purge moved the counter"


async def test_a_read_bigger_than_the_flow_control_window_takes_every_newest_change(
    backends, names, client: Client, drop_schedules
) -> None:
    """The read's consumer asks for flow control every 2 MB; the reader answers, and reads every subject's newest."""
    (a,) = await backends(1)
    stream = schedules_stream(names.stream, names.prefix)
    drop_schedules.append(stream)
    padding = "x" * 100_000  # 40 messages of 100 kB: 4 MB
    newest: dict[str, int] = {}
    for i in range(20):
        for n in range(2):
            record = json.dumps({"format": 1, "task": "t", "cron": f"{n} * * * *", "kwargs": {"p": padding}})
            newest[f"s{i}"] = await a.put_schedule(f"s{i}", record, expect=None, change="{}")
    first = newest["s0"]
    gone = await a.put_schedule("s7", None, expect=None, change="{}")
    del newest["s7"]
    answers = await client.subscribe(f"$JS.FC.{stream}.>")

    rows = await a.schedules_since(0)
    assert [(name, rev) for name, _, rev in rows] == sorted(newest.items(), key=lambda kv: kv[1])
    assert all(json.loads(record)["cron"] == "1 * * * *" for _, record, _ in rows), "an older change was kept"
    assert (await answers.next_msg(timeout=2)).data == b"", "the flow control was not answered"
    since = await a.schedules_since(first)
    assert [(name, rev) for name, _, rev in since][-1] == ("s7", gone), "a removal after the revision is a tombstone"
    assert sorted(name for name, _, _ in since) == sorted(f"s{i}" for i in range(1, 20)), "s0 changed at the revision"


async def test_a_read_that_lost_a_message_is_refused_not_taken_as_whole() -> None:
    """Without acks nothing is delivered twice: a consumer sequence skipped is a message lost on the way."""
    root = "$ANARCHON.S_schedules_x."
    reader = schedules_module._Reader(None, len(root))  # type: ignore[arg-type]

    def delivered(consumer_seq: int, stream_seq: int, pending: int) -> Msg:
        reply = f"$JS.ACK.S_schedules_x.c.1.{stream_seq}.{consumer_seq}.1700000000000000000.{pending}"
        data = schedules_module.encode_change(_record("0 * * * *"), "{}")
        return Msg(None, subject=f"{root}n{stream_seq}", reply=reply, data=data)  # type: ignore[arg-type]

    heartbeat = Msg(None, subject="in", data=b"", headers={"Status": "100", "Description": "Idle Heartbeat"})  # type: ignore[arg-type]
    for msg in (delivered(1, 4, 2), heartbeat, delivered(3, 9, 0)):
        await reader.take(msg)
    assert [c.revision for c in reader.out] == [4]
    with pytest.raises(nats.errors.Error, match="missing"):
        await reader.finished()


@pytest.fixture
async def cluster_stream(cluster: Cluster) -> AsyncIterator[str]:
    name = f"CS_{uuid.uuid4().hex[:10]}"
    yield name
    nc = await nats.connect(cluster.live_urls())
    try:
        for stream in (name, *(schedules_stream(name, p) for p in ("a.cron.", "b.cron."))):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await nc.jetstream().delete_stream(stream)
    finally:
        await nc.close()


@pytest.mark.slow
async def test_the_schedules_stream_has_the_replicas_of_the_backends_stream(
    cluster: Cluster, cluster_stream: str
) -> None:
    async def replicas_of_schedules(prefix: str, **kw: int) -> int:
        b = NatsBackend(cluster.live_urls(), stream=cluster_stream, prefix=prefix, **kw)
        await b.start()
        try:
            await b.put_schedule("x", _record("0 * * * *"), expect=None, change="{}")
            js = b._jetstream()
            info = await js.stream_info(schedules_stream(cluster_stream, prefix))
            return int(info.config.num_replicas or 0)
        finally:
            await b.close()

    assert await replicas_of_schedules("a.cron.", replicas=3) == 3
    assert await replicas_of_schedules("b.cron.") == 3, "a new one takes the replicas the backend's stream has"
    assert await replicas_of_schedules("b.cron.", replicas=1) == 1, "replicas= given updates it"
