"""JetStream API requests sent together, their answers awaited together on one reply subscription.

A claim batch in which other instances won most slots reads each winner's
stored claim (to compare tokens). One ``js.get_msg`` each was a task, a
request with its own timer, and the stored headers parsed by the ``email``
package: at 1,000 every-second jobs on three instances those reads were the
largest share of an instance's CPU. Here every request of a batch is one
publish with a reply subject under one inbox, the batch waits once, and only
the message's data is decoded (the headers are never needed).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Sequence
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import APIError

__all__ = ["Requests"]


class Requests:
    """Replies come to ``<inbox>.<n>``; each request's future is answered by the one subscription."""

    def __init__(self) -> None:
        self._nc: Client | None = None
        self._prefix = ""
        self._waiting: dict[str, asyncio.Future[bytes]] = {}
        self._next = 0

    async def _ready(self, nc: Client) -> None:
        if self._nc is not nc:
            prefix = nc.new_inbox() + "."
            await nc.subscribe(prefix + "*", cb=self._answer)
            self._nc, self._prefix = nc, prefix

    async def _answer(self, msg: Msg) -> None:
        future = self._waiting.pop(msg.subject[len(self._prefix) :], None)
        if future is not None and not future.done():
            future.set_result(msg.data)

    async def all(self, nc: Client, requests: Sequence[tuple[str, bytes]], timeout: float) -> list[bytes]:
        """Each request's reply, in order; raises ``nats.errors.TimeoutError`` if any is missing at ``timeout``."""
        await self._ready(nc)
        loop = asyncio.get_running_loop()
        keys: list[str] = []
        futures: list[asyncio.Future[bytes]] = []
        try:
            for subject, payload in requests:
                self._next += 1
                key = str(self._next)
                future: asyncio.Future[bytes] = loop.create_future()
                self._waiting[key] = future
                keys.append(key)
                futures.append(future)
                await nc.publish(subject, payload, reply=self._prefix + key)
            if futures:
                await asyncio.wait(futures, timeout=timeout)
            if not all(f.done() for f in futures):
                raise nats.errors.TimeoutError
            return [f.result() for f in futures]
        finally:
            for key in keys:
                self._waiting.pop(key, None)


def stored_data(reply: bytes) -> bytes | None:
    """The data of a ``STREAM.MSG.GET`` reply; ``None`` when the message is gone (404)."""
    answer: dict[str, Any] = json.loads(reply)
    error = answer.get("error")
    if error is not None:
        if error.get("code") == 404:
            return None
        raise APIError.from_error(error)
    return base64.b64decode(answer["message"].get("data") or b"")
