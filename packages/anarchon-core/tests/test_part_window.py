"""The claim window alone: the bound on claims out, the order of the batches waiting, and cancellation.

No clock is involved: each test awaits the window's own futures.
"""

from __future__ import annotations

import asyncio

import pytest

from anarchon._window import ClaimWindow


async def _entered(window: ClaimWindow, n: int, order: list[int]) -> None:
    await window.enter(n)
    order.append(n)


async def test_batches_within_the_bound_go_at_once_and_the_rest_wait() -> None:
    window = ClaimWindow(10)
    assert await window.enter(6) is False
    assert await window.enter(4) is False
    assert window.out == 10
    waiting = asyncio.ensure_future(window.enter(1))
    await asyncio.sleep(0)
    assert not waiting.done() and window.waiting == 1
    window.leave(4)
    assert await waiting is True
    assert window.out == 7


async def test_a_batch_larger_than_the_bound_goes_alone_when_nothing_is_out() -> None:
    window = ClaimWindow(3)
    assert await window.enter(50) is False
    behind = asyncio.ensure_future(window.enter(1))
    await asyncio.sleep(0)
    assert not behind.done()
    window.leave(50)
    await behind
    assert window.out == 1


async def test_waiting_batches_go_in_the_order_they_came_small_ones_do_not_overtake() -> None:
    window = ClaimWindow(4)
    await window.enter(4)
    order: list[int] = []
    tasks = [asyncio.ensure_future(_entered(window, n, order)) for n in (3, 1, 2)]
    await asyncio.sleep(0)
    assert window.waiting == 3
    window.leave(2)  # room for 2: the 3 first in line does not fit, so nobody goes
    await asyncio.sleep(0)
    assert order == []
    window.leave(2)  # empty: the 3 goes, then the 1 fits beside it; the 2 waits
    await asyncio.sleep(0)
    assert order == [3, 1] and window.out == 4
    window.leave(4)
    await asyncio.gather(*tasks)
    assert order == [3, 1, 2]


async def test_a_cancelled_waiting_batch_leaves_the_line_and_lets_the_next_one_through() -> None:
    window = ClaimWindow(2)
    await window.enter(2)
    first = asyncio.ensure_future(window.enter(2))
    second = asyncio.ensure_future(window.enter(1))
    await asyncio.sleep(0)
    window.leave(1)  # room for 1: the 2 in front blocks the 1
    await asyncio.sleep(0)
    assert not second.done()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await second is True
    assert window.out == 2 and window.waiting == 0


def test_a_window_of_less_than_one_claim_is_refused() -> None:
    with pytest.raises(ValueError, match="limit=0"):
        ClaimWindow(0)
