"""Stored-schedule changes published: the channel, PUBLISH in the change's script, the subscription's faults.

The conformance suite's ``ScheduleNotifyTests`` check the wait on one server
and on the cluster; here what only Redis has: the channel under the prefix's
``{schedules}`` hash tag, a refused change publishing nothing, and the
subscription's connection killed.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import anarchon.listener
from anarchon.errors import ScheduleConflictError

from .conftest import Store


def _record(cron: str = "0 * * * *") -> str:
    return json.dumps({"format": 1, "task": "t", "cron": cron, "kwargs": {}, "options": {}})


async def _message(pubsub: Any, kind: str) -> Any:
    while True:
        message = await pubsub.get_message(timeout=1.0)
        if message is not None and message["type"] == kind:
            return message["data"]


async def test_each_schedule_change_is_published_with_its_revision_and_a_refused_one_is_not(store: Store) -> None:
    backend = await store.backend()
    channel = backend._keys.schedules_channel
    assert channel == f"{store.prefix}{{schedules}}:changed", "the channel carries the schedule keys' hash tag"
    client = store.raw()
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(channel)
        await asyncio.wait_for(_message(pubsub, "subscribe"), 10)
        first = await backend.put_schedule("s", _record(), expect=0, change="{}")
        with pytest.raises(ScheduleConflictError):
            await backend.put_schedule("s", _record("5 * * * *"), expect=0, change="{}")
        second = await backend.put_schedule("s", None, expect=first, change="{}")
        got = [await asyncio.wait_for(_message(pubsub, "message"), 10) for _ in range(2)]
        assert got == [str(first), str(second)], "the refused change was published, or a change was not"
    finally:
        await pubsub.aclose()
        await client.aclose()


async def test_a_killed_subscription_falls_back_to_the_poll_and_subscribes_again(
    single: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(anarchon.listener, "RETRY_S", 0.5)
    writer, reader = await single.backend(), await single.backend()
    revision = await reader.schedules_revision()
    assert await reader.wait_schedules(revision, 5000) is True, "the first wait subscribes and answers at once"
    listener = reader._listener
    assert listener is not None and listener._pubsub is not None
    host, port = listener._pubsub.connection._writer.get_extra_info("sockname")[:2]
    waiting = asyncio.ensure_future(reader.wait_schedules(revision, 30_000))
    await asyncio.sleep(0)
    client = single.raw()
    try:  # only this subscription's connection: other clients of the shared server keep theirs
        if await client.execute_command("CLIENT", "KILL", "ADDR", f"{host}:{port}") not in (True, "OK", b"OK"):
            # Behind docker's port proxy the server sees the proxy's address; that server is this run's own,
            # and the reader's subscription, made just now, is its newest subscriber.
            newest = min(await client.client_list(_type="pubsub"), key=lambda c: int(c["age"]))
            assert await client.client_kill_filter(_id=newest["id"]) == 1
    finally:
        await client.aclose()
    assert await asyncio.wait_for(waiting, 5) is False, "a lost subscription must end the wait with False, not raise"
    began = time.monotonic()
    while not await reader.wait_schedules(revision, 200):  # sleeps until RETRY_S passed, then subscribes again
        assert time.monotonic() - began < 5, "the listener never subscribed again"
    waiting = asyncio.ensure_future(reader.wait_schedules(await reader.schedules_revision(), 30_000))
    await asyncio.sleep(0)
    await writer.put_schedule("after", _record(), expect=0, change="{}")
    assert await asyncio.wait_for(waiting, 5) is True


async def test_close_gives_the_subscription_back_and_a_quiet_wait_pings_it(single: Store) -> None:
    backend = await single.backend()
    revision = await backend.schedules_revision()
    await backend.wait_schedules(revision, 1000)
    began = time.monotonic()
    assert await backend.wait_schedules(revision, 300) is True, "a quiet wait on a live subscription answers True"
    assert time.monotonic() - began >= 0.29
    listener = backend._listener
    assert listener is not None and listener.live
    await backend.close()
    assert backend._listener is None and not listener.live and listener._pubsub is None
