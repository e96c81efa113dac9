"""Stored-schedule changes pushed (capability ``schedule_notify``): another instance's wait ends at the change.

With ``schedule_notify`` the instances wait between polls on the store's
notification (:meth:`~anarchon.backend.Backend.wait_schedules`), and poll only
every :data:`~anarchon.schedules.NOTIFIED_POLL_MS` as the fallback, so a wait
that a change does not end makes the fleet see that change late by up to that
much. Each test first waits once, briefly, so the backend makes its
subscription (a wait that makes it may end at once: what came before it is
unknown); the waits measured come after it.
"""

from __future__ import annotations

import asyncio
import json
import time

from anarchon.backend import Backend

from ._base import SuiteBase
from ._harness import Conformance
from ._jobs import unique_name
from ._requires import gated

__all__ = ["ScheduleNotifyTests"]

#: The bound on a change reaching another instance's wait: well under the poll it replaces.
WOKEN_S = 3.0
#: How much earlier than its timeout a wait nothing ended may return (timer granularity).
EARLY_S = 0.05


def _record(cron: str) -> str:
    return json.dumps({"format": 1, "task": "t", "cron": cron, "kwargs": {}, "options": {}})


async def _subscribed(backend: Backend) -> int:
    """Let the backend subscribe (one short wait, which may end at once); the counter read after it."""
    await asyncio.wait_for(backend.wait_schedules(await backend.schedules_revision(), 500), 10 + WOKEN_S)
    return await backend.schedules_revision()


@gated("schedules", "schedule_notify")
class ScheduleNotifyTests(SuiteBase):
    """A change ends another instance's wait at once; a wait that nothing ends lasts its timeout."""

    async def test_a_change_ends_another_instances_wait(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        name = unique_name("notify")
        for step, record in enumerate((_record("0 * * * *"), _record("5 * * * *"), None)):
            revision = await _subscribed(b.backend)
            waiting = asyncio.ensure_future(b.backend.wait_schedules(revision, 30_000))
            for _ in range(5):
                await asyncio.sleep(0)
            assert not waiting.done(), f"wait_schedules({revision}, 30000) ended with nothing changed"
            current = (await a.backend.schedule(name) or ("", 0))[1]
            began = time.monotonic()
            await a.backend.put_schedule(name, record, expect=current, change=f'{{"step":{step}}}')
            try:
                listening = await asyncio.wait_for(waiting, WOKEN_S)
            except TimeoutError:
                raise AssertionError(
                    f"change {step} ({'a removal' if record is None else 'a put'}) did not end another instance's "
                    f"30 s wait within {WOKEN_S} s"
                ) from None
            assert listening is True, "a wait a notification ended must say it was listening (True)"
            assert time.monotonic() - began < WOKEN_S

    async def test_a_change_notified_before_the_wait_ends_it_at_once(self, conformance: Conformance) -> None:
        """The change lands between an instance's poll and its next wait: the wait must not sleep through it."""
        a, b = await conformance.instances(2)
        revision = await _subscribed(b.backend)
        await a.backend.put_schedule(unique_name("notify"), _record("0 * * * *"), expect=0, change="{}")
        await asyncio.sleep(0.5)  # the notification arrives while nobody waits (if it is slower, the wait gets it)
        try:
            listening = await asyncio.wait_for(b.backend.wait_schedules(revision, 30_000), WOKEN_S)
        except TimeoutError:
            raise AssertionError(
                "a change notified before the wait did not end it: the wait slept through it"
            ) from None
        assert listening is True

    async def test_a_wait_nothing_ends_lasts_its_timeout(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        revision = await _subscribed(b.backend)
        for timeout_ms in (300, 1500):
            began = time.monotonic()
            listening = await asyncio.wait_for(b.backend.wait_schedules(revision, timeout_ms), timeout_ms / 1000 + 10)
            took = time.monotonic() - began
            assert took >= timeout_ms / 1000 - EARLY_S, f"wait_schedules(…, {timeout_ms}) returned after {took:.3f} s"
            assert listening is True, "a subscribed wait that timed out must say it is listening (True)"
        stale = await a.backend.put_schedule(unique_name("notify"), _record("0 * * * *"), expect=0, change="{}")
        revision = await _subscribed(b.backend)
        assert revision >= stale
        began = time.monotonic()
        await asyncio.wait_for(b.backend.wait_schedules(revision, 1000), 10 + WOKEN_S)
        took = time.monotonic() - began
        assert took >= 1 - EARLY_S, f"a change the caller holds already ended its wait after {took:.3f} s"
