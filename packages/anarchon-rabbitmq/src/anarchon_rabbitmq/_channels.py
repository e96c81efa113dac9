"""A small pool of confirm channels, each lent to one operation at a time.

aiormq serialises synchronous methods per channel, and a failed declare closes
its channel together with every publish still waiting there. Lending a channel
to one claim at a time keeps claims concurrent and a failure confined to the
claim that caused it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aio_pika.abc

__all__ = ["ChannelPool", "Lent"]


class Lent:
    """One lent channel: the aio-pika channel and the aiormq channel under it."""

    __slots__ = ("channel", "keep", "raw")

    def __init__(self, channel: aio_pika.abc.AbstractChannel, raw: Any) -> None:
        self.channel = channel
        self.raw = raw
        self.keep = True

    def discard(self) -> None:
        """Do not lend this channel again (closed by the broker, or a reply still pending)."""
        self.keep = False


class ChannelPool:
    def __init__(self, connection: aio_pika.abc.AbstractConnection, size: int) -> None:
        self._connection = connection
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Lent] = []
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    @contextlib.asynccontextmanager
    async def lend(self) -> AsyncIterator[Lent]:
        async with self._slots:
            lent = await self._take()
            try:
                yield lent
            except BaseException:
                lent.discard()
                raise
            finally:
                self._give_back(lent)

    async def _take(self) -> Lent:
        while self._idle:
            lent = self._idle.pop()
            if not lent.channel.is_closed and not lent.raw.is_closed:
                return lent
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        return Lent(channel, await channel.get_underlay_channel())

    def _give_back(self, lent: Lent) -> None:
        if lent.keep and not self._closed and not lent.channel.is_closed and not lent.raw.is_closed:
            self._idle.append(lent)
            return
        if not lent.channel.is_closed:
            task = asyncio.get_running_loop().create_task(self._close_quietly(lent.channel))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close_quietly(channel: aio_pika.abc.AbstractChannel) -> None:
        with contextlib.suppress(Exception):
            await channel.close()

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        await asyncio.gather(*(self._close_quietly(lent.channel) for lent in idle))
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
