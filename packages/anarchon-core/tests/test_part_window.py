"""The claim window alone: the bound on claims out, the order of the batches waiting, and cancellation.

No clock is involved: each test awaits the window's own futures. What the
window does to late slots inside a scheduler is in tests/scenarios.
"""

from __future__ import annotations

import asyncio

import pytest

from anarchon._window import ClaimWindow


async def test_batches_past_the_bound_wait_and_go_in_the_order_they_came() -> None:
    window = ClaimWindow(10)
    assert await window.enter(6) is False
    order: list[str] = []

    async def batch(name: str, n: int) -> None:
        await window.enter(n)
        order.append(name)

    second = asyncio.ensure_future(batch("second", 6))  # 12 > 10: waits
    third = asyncio.ensure_future(batch("third", 1))  # would fit, but must not overtake the second
    await asyncio.sleep(0)
    assert (order, window.out, window.waiting) == ([], 6, 2)
    window.leave(6)
    await asyncio.gather(second, third)
    assert order == ["second", "third"]
    assert window.out == 7


async def test_a_batch_larger_than_the_bound_goes_alone() -> None:
    window = ClaimWindow(10)
    assert await window.enter(25) is False  # nothing out: it is never stuck
    waiting = asyncio.ensure_future(window.enter(1))
    await asyncio.sleep(0)
    assert not waiting.done()
    window.leave(25)
    assert await waiting is True


async def test_a_cancelled_waiter_gives_its_place_to_the_next() -> None:
    window = ClaimWindow(10)
    await window.enter(8)
    big = asyncio.ensure_future(window.enter(5))
    small = asyncio.ensure_future(window.enter(2))
    await asyncio.sleep(0)
    assert window.waiting == 2
    big.cancel()
    with pytest.raises(asyncio.CancelledError):
        await big
    assert await small is True  # 8 + 2 fits once the 5 ahead of it is gone
    assert (window.out, window.waiting) == (10, 0)


async def test_a_waiter_cancelled_as_its_turn_came_leaves_no_claims_counted() -> None:
    window = ClaimWindow(10)
    await window.enter(10)
    waiter = asyncio.ensure_future(window.enter(4))
    await asyncio.sleep(0)
    window.leave(10)  # its turn is given ...
    waiter.cancel()  # ... and it is cancelled before it ran again
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert (window.out, window.waiting) == (0, 0)


def test_a_window_of_less_than_one_claim_is_refused() -> None:
    with pytest.raises(ValueError, match="limit=0"):
        ClaimWindow(0)
