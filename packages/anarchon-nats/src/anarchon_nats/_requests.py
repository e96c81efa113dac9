"""JetStream API requests and publishes sent together, their answers awaited together on one reply subscription.

A claim batch in which other instances won most slots reads each winner's
stored claim (to compare tokens). One ``js.get_msg`` each was a task, a
request with its own timer, and the stored headers parsed by the ``email``
package: at 1,000 every-second jobs on three instances those reads were the
largest share of an instance's CPU. Here every request of a batch is one
publish with a reply subject under one inbox, the batch waits once, and only
the message's data is decoded (the headers are never needed).

Claims and results are published the same way, not with nats-py's
``publish_async``: that one leaves the future of a publish the stream
refused (a full stream's "maximum bytes exceeded") unanswered and hands the
error to the connection's error callback instead (nats.py issue #985), so
each refused claim was one warning and the batch timed out 5 s later saying
only "timeout". Here a refusal is the answer of its own publish.
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
from nats.js.api import PubAck
from nats.js.errors import APIError

__all__ = ["Requests", "pub_ack", "stored_data"]

#: A reply that carries only a status header: nothing listens on the subject (no stream covers it).
_NO_RESPONDERS = "503"


class Requests:
    """Replies come to ``<inbox>.<n>``; each request's future is answered by the one subscription.

    ``max_pending`` bounds the requests awaiting an answer (a new one waits for
    room), as ``publish_async`` bounded its publishes to 4,000: past what the
    server answers an instance keeps that many claims out, no more.
    """

    def __init__(self, max_pending: int | None = None) -> None:
        self._nc: Client | None = None
        self._prefix = ""
        self._waiting: dict[str, asyncio.Future[bytes]] = {}
        self._next = 0
        self._room = asyncio.Semaphore(max_pending) if max_pending else None

    async def _ready(self, nc: Client) -> None:
        if self._nc is not nc:
            prefix = nc.new_inbox() + "."
            await nc.subscribe(prefix + "*", cb=self._answer)
            self._nc, self._prefix = nc, prefix

    async def _answer(self, msg: Msg) -> None:
        future = self._waiting.pop(msg.subject[len(self._prefix) :], None)
        if future is None or future.done():
            return
        if not msg.data and msg.headers and msg.headers.get("Status") == _NO_RESPONDERS:
            future.set_exception(nats.errors.NoRespondersError())
        else:
            future.set_result(msg.data)

    async def answers(
        self,
        nc: Client,
        requests: Sequence[tuple[str, bytes, dict[str, str] | None]],
        timeout: float,
    ) -> list[bytes | BaseException]:
        """Each request's reply or its error, in order; ``nats.errors.TimeoutError`` where none came by ``timeout``."""
        await self._ready(nc)
        loop = asyncio.get_running_loop()
        keys: list[str] = []
        futures: list[asyncio.Future[bytes]] = []
        try:
            for subject, payload, headers in requests:
                if self._room is not None:
                    await self._room.acquire()
                self._next += 1
                key = str(self._next)
                future: asyncio.Future[bytes] = loop.create_future()
                if self._room is not None:
                    future.add_done_callback(self._release)
                self._waiting[key] = future
                keys.append(key)
                futures.append(future)
                await nc.publish(subject, payload, reply=self._prefix + key, headers=headers)
            if futures:
                await asyncio.wait(futures, timeout=timeout)
            return [
                (f.exception() or f.result()) if f.done() and not f.cancelled() else nats.errors.TimeoutError()
                for f in futures
            ]
        finally:
            for key, future in zip(keys, futures, strict=True):
                self._waiting.pop(key, None)
                if not future.done():
                    future.cancel()  # frees its room

    def _release(self, _: asyncio.Future[bytes]) -> None:
        assert self._room is not None
        self._room.release()

    async def all(self, nc: Client, requests: Sequence[tuple[str, bytes]], timeout: float) -> list[bytes]:
        """Each request's reply, in order; raises the first error (``nats.errors.TimeoutError`` for a missing one)."""
        replies = await self.answers(nc, [(subject, payload, None) for subject, payload in requests], timeout)
        out: list[bytes] = []
        for reply in replies:
            if isinstance(reply, BaseException):
                raise reply
            out.append(reply)
        return out


def stored_data(reply: bytes) -> bytes | None:
    """The data of a ``STREAM.MSG.GET`` reply; ``None`` when the message is gone (404)."""
    answer: dict[str, Any] = json.loads(reply)
    error = answer.get("error")
    if error is not None:
        if error.get("code") == 404:
            return None
        raise APIError.from_error(error)
    return base64.b64decode(answer["message"].get("data") or b"")


def pub_ack(reply: bytes | BaseException) -> PubAck | BaseException:
    """A publish's acknowledgement, or the error the stream answered instead (returned, not raised)."""
    if isinstance(reply, BaseException):
        return reply
    try:
        answer: dict[str, Any] = json.loads(reply)
        error = answer.get("error")
        if error is not None:
            APIError.from_error(error)  # it raises the error's class (503: ServiceUnavailableError, ...)
            return APIError(**error)
        return PubAck.from_response(answer)
    except Exception as exc:  # an error answer, or a reply that is not an acknowledgement
        return exc
