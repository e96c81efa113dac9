"""The kit's schedule listener (``anarchon.listener``) over a fake client, on a loop ``looptime`` fast-forwards.

What PostgreSQL's ``LISTEN`` and Redis's ``SUBSCRIBE`` backends rely on: the
first wait subscribes and answers at once, a notification ends a wait (also
one that came before it) unless the caller holds its revision, a loss ends
the wait with ``False`` and falls back to sleeping, subscriptions are tried
at most once per ``RETRY_S``, a quiet wait pings, and nothing but a
cancellation is raised.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from anarchon.listener import RETRY_S, ScheduleListener

pytestmark = pytest.mark.looptime


class Fake(ScheduleListener):
    def __init__(self) -> None:
        super().__init__("fake")
        self.subscribes = self.pings = self.unsubscribes = 0
        self.refuse: Exception | None = None
        self.ping_fails = False
        self.hang = False

    async def subscribe(self) -> None:
        self.subscribes += 1
        if self.hang:
            await asyncio.sleep(3600)
        if self.refuse is not None:
            raise self.refuse

    async def ping(self) -> None:
        self.pings += 1
        if self.ping_fails:
            raise ConnectionError("no answer")

    async def unsubscribe(self) -> None:
        self.unsubscribes += 1


async def _timed(listener: Fake, revision: int, timeout_ms: int) -> tuple[bool, float]:
    loop = asyncio.get_running_loop()
    began = loop.time()
    answer = await listener.wait(revision, timeout_ms)
    return answer, loop.time() - began


async def test_the_first_wait_subscribes_and_answers_at_once_then_waits_its_timeout_and_pings() -> None:
    listener = Fake()
    assert await _timed(listener, 5, 10_000) == (True, 0)
    assert (listener.subscribes, listener.live) == (1, True)
    answer, took = await _timed(listener, 5, 10_000)
    assert (answer, round(took, 3), listener.pings) == (True, 10, 1)


async def test_a_notification_ends_the_wait_unless_the_caller_holds_its_revision() -> None:
    listener = Fake()
    await listener.wait(0, 1000)
    loop = asyncio.get_running_loop()
    loop.call_later(2, listener.changed, "5")  # a revision the caller holds: nothing to read
    loop.call_later(3, listener.changed, b"7")
    answer, took = await _timed(listener, 5, 10_000)
    assert (answer, round(took, 3)) == (True, 3)
    listener.changed("9")  # while nobody waits: the next wait ends at once
    assert await _timed(listener, 7, 10_000) == (True, 0)
    listener.changed("not a revision")  # a payload without one: anything may have moved
    assert await _timed(listener, 10**12, 10_000) == (True, 0)
    listener.changed("8")  # older than what the caller holds: dropped
    assert (await _timed(listener, 9, 1000))[1] == pytest.approx(1)


async def test_a_loss_ends_the_wait_with_false_and_the_next_subscription_waits_for_retry_s() -> None:
    listener = Fake()
    await listener.wait(0, 1000)
    asyncio.get_running_loop().call_later(2, listener.lost, "the connection closed")
    answer, took = await _timed(listener, 0, 10_000)
    assert (answer, round(took, 3), listener.live, listener.unsubscribes) == (False, 2, False, 1)
    answer, took = await _timed(listener, 0, 1000)  # within RETRY_S of the last try: only sleeps
    assert (answer, round(took, 3), listener.subscribes) == (False, 1, 1)
    await asyncio.sleep(RETRY_S)
    assert await _timed(listener, 0, 1000) == (True, 0)
    assert listener.subscribes == 2


async def test_a_refused_subscription_sleeps_warns_once_and_is_tried_again_after_retry_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listener = Fake()
    listener.refuse = PermissionError("NOPERM this user has no permissions to access the channel")
    with caplog.at_level(logging.INFO, logger="anarchon.schedules"):
        for _ in range(12):
            answer, took = await _timed(listener, 0, 1000)
            assert (answer, round(took, 3)) == (False, 1)
        listener.refuse = None
        while not await listener.wait(0, 1000):
            pass
    assert 12 / RETRY_S <= listener.subscribes - 1 <= 12 / RETRY_S + 2, listener.subscribes
    assert listener.unsubscribes == listener.subscribes - 1, "each refused try closes what it half made"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "NOPERM" in warnings[0].getMessage()
    assert any("subscribed to schedule changes again" in r.getMessage() for r in caplog.records)


async def test_a_quiet_wait_whose_ping_fails_answers_false_and_drops_the_connection() -> None:
    listener = Fake()
    await listener.wait(0, 1000)
    listener.ping_fails = True
    answer, took = await _timed(listener, 0, 10_000)
    assert (answer, round(took, 3), listener.live, listener.unsubscribes) == (False, 10, False, 1)


async def test_a_cancelled_subscription_closes_what_it_made_and_lets_the_cancellation_through() -> None:
    listener = Fake()
    listener.hang = True
    waiting = asyncio.ensure_future(listener.wait(0, 1000))
    await asyncio.sleep(1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert (listener.unsubscribes, listener.live) == (1, False)


async def test_close_ends_a_wait_and_a_later_wait_subscribes_again() -> None:
    listener = Fake()
    await listener.wait(0, 1000)
    asyncio.get_running_loop().call_later(1, lambda: asyncio.ensure_future(listener.close()))
    answer, took = await _timed(listener, 0, 10_000)
    assert (answer, round(took, 3)) == (False, 1)
    await asyncio.sleep(RETRY_S)
    assert await listener.wait(0, 1000) is True
