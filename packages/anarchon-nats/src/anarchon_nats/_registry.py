"""The fleet registry on NATS: a JetStream key-value bucket of its own, ``<stream>_registry``.

Keys are ``<prefix>.h.<instance>`` (the head, put again every registry poll)
and ``<prefix>.j.<instance>`` (the job definitions, put when they change),
the prefix and the instance id hex-encoded, since both may hold characters
a key may not. There is no heartbeat on this claim-tier backend, so an entry
is live while its head was put within :data:`~anarchon.fleet.REGISTRY_TTL_MS`
(judged by the server's timestamp of the put against this host's clock); a
killed instance leaves the views within 5 s. Heads older than
:data:`~anarchon.liveness.RETAIN_DEAD_MS` are purged, with their jobs, by
any reader. The bucket is created by the first write, never by a look.

Reading the heads is one ordered consumer over ``<prefix>.h.*`` (the last
value of each key, read until the server says nothing is pending); the jobs are read one key each, only for instances
whose fingerprint the reader has not seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy
from nats.js.errors import APIError, BucketNotFoundError, KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from anarchon.fleet import REGISTRY_TTL_MS
from anarchon.liveness import RETAIN_DEAD_MS

from ._full import Outage, is_full

__all__ = ["RegistryMixin"]

#: How long reading the heads waits for the next one before it counts them all read.
WATCH_TIMEOUT_S = 5.0


def _hex(text: str) -> str:
    return text.encode().hex()


def _instance(key: str) -> str | None:
    try:
        return bytes.fromhex(key.rsplit(".", 1)[1]).decode()
    except (ValueError, IndexError):
        return None  # not a key this backend wrote


class RegistryMixin:
    """Mixed into :class:`~anarchon_nats.NatsBackend`."""

    stream: str
    prefix: str

    if TYPE_CHECKING:  # the backend's own, used here

        def _jetstream(self) -> JetStreamContext: ...

        _outage: Outage

    #: The bucket once opened (reset by close()), and the head each instance registered, put again to keep it.
    _kv: KeyValue | None
    _heads: dict[str, str]
    #: Each instance's newest head read so far, and when the server stored it (ms): see :meth:`registered`.
    _read_heads: dict[str, tuple[str, int]]

    @property
    def _bucket(self) -> str:
        return f"{self.stream}_registry"

    def _key(self, kind: str, instance: str) -> str:
        return f"{_hex(self.prefix)}.{kind}.{_hex(instance)}"

    async def _bucket_kv(self, *, create: bool) -> KeyValue | None:
        if self._kv is not None:
            return self._kv
        js = self._jetstream()
        try:
            self._kv = await js.key_value(self._bucket)
        except (BucketNotFoundError, NotFoundError):
            if not create:
                return None
            self._kv = await js.create_key_value(bucket=self._bucket, history=1)
        return self._kv

    async def register(self, instance: str, head: str, jobs: str) -> None:
        kv = await self._bucket_kv(create=True)
        assert kv is not None
        await self._put(kv, self._key("j", instance), jobs.encode())
        await self._put(kv, self._key("h", instance), head.encode())
        self._heads[instance] = head

    async def keep_registered(self, instance: str) -> None:
        head = self._heads.get(instance)
        kv = await self._bucket_kv(create=False)
        if head is not None and kv is not None:
            await self._put(kv, self._key("h", instance), head.encode())

    async def _put(self, kv: KeyValue, key: str, value: bytes) -> None:
        """A put; a server whose JetStream storage is full refuses it as it refuses claims, so it says so alike.

        Whichever fails first is the one warning the scheduler logs for the outage.
        """
        try:
            await kv.put(key, value)
        except APIError as exc:
            if not is_full(exc):
                raise
            raise await self._outage.error(self._jetstream(), exc, f"KV_{self._bucket}") from None

    async def unregister(self, instance: str) -> None:
        self._heads.pop(instance, None)
        self._read_heads.pop(instance, None)
        kv = await self._bucket_kv(create=False)
        if kv is None:
            return
        for kind in ("h", "j"):
            with contextlib.suppress(KeyNotFoundError):
                await kv.purge(self._key(kind, instance))

    async def registered(self) -> list[tuple[str, str, int | None]]:
        kv = await self._bucket_kv(create=False)
        if kv is None:
            return []
        now = time.time_ns() // 1_000_000
        heads, gone = await self._last_heads()
        # A read that missed a head (an earlier form of this read did under load) does not make
        # that instance gone: a head read before stays live until its put is REGISTRY_TTL_MS old,
        # unless this read saw its removal.
        for instance in gone:
            self._read_heads.pop(instance, None)
        for instance, (head, put_ms) in heads.items():
            if put_ms >= self._read_heads.get(instance, ("", 0))[1]:
                self._read_heads[instance] = (head, put_ms)
        live: list[tuple[str, str, int | None]] = []
        for instance, (head, put_ms) in list(self._read_heads.items()):
            if put_ms >= now - REGISTRY_TTL_MS:
                live.append((instance, head, put_ms))
                continue
            self._read_heads.pop(instance)
            if put_ms < now - RETAIN_DEAD_MS:
                await self.unregister(instance)  # long dead: its entry goes
        return sorted(live)

    async def _last_heads(self) -> tuple[dict[str, tuple[str, int]], set[str]]:
        """The last head of each instance and when the server stored it (ms), and the instances removed.

        One ordered consumer.

        Not ``KeyValue.watch``: its end-of-snapshot marker is decided by the client's count of
        messages it has *processed*, so a head already on the wire but not yet processed made it
        report an empty bucket (once in CI, under load: an instance read as gone 0.8 s after
        it was kept). Here the snapshot is empty only when the server says it delivered nothing
        and has nothing pending; otherwise reading stops at the message the server sent with
        nothing pending after it.
        """
        updates: asyncio.Queue[Msg] = asyncio.Queue()

        async def collect(msg: Msg) -> None:
            await updates.put(msg)

        sub = await self._jetstream().subscribe(
            f"$KV.{self._bucket}.{_hex(self.prefix)}.h.*",
            stream=f"KV_{self._bucket}",
            cb=collect,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
        )
        heads: dict[str, tuple[str, int]] = {}
        gone: set[str] = set()
        try:
            info = await sub.consumer_info()
            if info.num_pending == 0 and (info.delivered is None or not info.delivered.stream_seq):
                return heads, gone
            # Bounded as a whole: while other instances put their heads again every second, the
            # message with nothing pending after it can keep being put off. Every live head is put
            # at least once a second, so what arrived by the deadline holds each of them.
            deadline = time.monotonic() + WATCH_TIMEOUT_S
            while (left := deadline - time.monotonic()) > 0:
                try:
                    msg = await asyncio.wait_for(updates.get(), left)
                except asyncio.TimeoutError:
                    break
                meta = msg.metadata
                instance = _instance(msg.subject)
                if instance is not None:
                    if msg.headers and msg.headers.get("KV-Operation") in ("DEL", "PURGE"):
                        heads.pop(instance, None)
                        gone.add(instance)
                    else:
                        heads[instance] = (msg.data.decode(errors="replace"), int(meta.timestamp.timestamp() * 1000))
                        gone.discard(instance)
                if meta.num_pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        return heads, gone

    async def registered_jobs(self, instances: Sequence[str]) -> dict[str, str]:
        kv = await self._bucket_kv(create=False)
        if kv is None:
            return {}
        out: dict[str, str] = {}
        for instance in instances:
            try:
                entry = await kv.get(self._key("j", instance))
            except KeyNotFoundError:
                continue
            if entry.value is not None:
                out[instance] = entry.value.decode(errors="replace")
        return out
