"""Stored-schedule changes pushed on NATS: what is particular to the subscription to the stream's own subjects.

The contract (a change ends another instance's wait, one notified before the
wait ends it at once, a quiet wait lasts its timeout) is the conformance
suite's ``ScheduleNotifyTests``; these check the connection's life.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import nats
import pytest
from nats_helpers import Servers

from anarchon_nats import NatsBackend

pytestmark = pytest.mark.nats

JS = 'jetstream { store_dir: "@STORE@", max_memory_store: 32MB, max_file_store: 128MB }'


def _record() -> str:
    return json.dumps({"format": 1, "task": "t", "cron": "0 * * * *", "kwargs": {}, "options": {}})


async def test_a_change_made_while_the_reader_was_cut_ends_its_wait_once_it_is_back(servers: Servers) -> None:
    """A message published while the reader's connection is down is never heard: the reconnection must count as
    a change, or the reader sleeps through it until its fallback poll.

    The reader's connection is the caller's (the backend has no callback on it), reconnecting only after 3 s,
    so the writer's change surely falls in the cut.
    """
    node = servers.new(f"notify-{uuid.uuid4().hex[:6]}", JS)
    node.start()
    tag = uuid.uuid4().hex[:8]
    nc = await nats.connect(node.url, reconnect_time_wait=3, max_reconnect_attempts=-1)
    reader = NatsBackend(connection=nc, stream=f"N_{tag}", prefix=f"n{tag}.")
    await reader.start()
    try:
        revision = await reader.schedules_revision()
        assert await reader.wait_schedules(revision, 5000) is True, "the first wait subscribes and answers at once"
        waiting = asyncio.ensure_future(reader.wait_schedules(revision, 60_000))
        await asyncio.sleep(0)
        node.kill()
        node.start()
        writer = NatsBackend(node.url, stream=f"N_{tag}", prefix=f"n{tag}.")
        await writer.start()
        try:
            began = time.monotonic()
            await writer.put_schedule("cut", _record(), expect=0, change="{}")
            reconnects = nc.stats["reconnects"]
            listening = await asyncio.wait_for(waiting, 10)
            took = time.monotonic() - began
        finally:
            await writer.close()
        assert reconnects == 0, "the change must be made while the reader was still cut (the test's premise)"
        assert took < 5, f"the change made while the reader was cut ended its wait only after {took:.1f} s"
        assert listening is True, "the wait ended by the reconnection must say it listens"
        assert await reader.schedules_since(revision), "the change is there to read"
    finally:
        await reader.close()
        await nc.close()
        node.kill()


async def test_close_drops_the_subscription_and_a_quiet_wait_pings(nats_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    backend = NatsBackend(nats_url, stream=f"N_{tag}", prefix=f"n{tag}.")
    await backend.start()
    try:
        revision = await backend.schedules_revision()
        await backend.wait_schedules(revision, 1000)
        listener = backend._listener
        assert listener is not None and listener.live
        began = time.monotonic()
        assert await backend.wait_schedules(revision, 300) is True, "a quiet wait on a live subscription is True"
        assert time.monotonic() - began >= 0.29
    finally:
        await backend.close()
        nc = await nats.connect(nats_url)
        try:
            await nc.jetstream().delete_stream(f"N_{tag}")
        finally:
            await nc.close()
    assert backend._listener is None and not listener.live and listener._sub is None
