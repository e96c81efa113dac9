"""The audit trail on NATS: a stream of its own per namespace, one message per entry.

Where: the stream ``<stream>_audit_<digest>`` (the digest as for the stored
schedules' stream: one per namespace), subjects ``$ANARCHON.<that stream>.<job>``.
It is created by the first append, never by a look: file storage, limits
retention, discard old, at most :data:`~anarchon.audit.AUDIT_KEEP` messages
(the server drops the oldest, so the trim costs nothing), and the replicas of
the backend's stream (``replicas=`` when given).

What: the message is the entry's text; its stream sequence is the entry's
id, which only grows (a purge does not move it back). Nothing ever publishes
on an entry's subject again, so no entry is replaced.

Reading newest first: JetStream reads forward only, so the trail is read in
windows of sequences from the newest back, each window with ``STREAM.MSG.GET``
of the next message on the subject (the job's, or every job's) from the
window's start until past its end: one request per entry read plus one per
window. A listing of 50 is about 51 requests; by job, the windows are
:data:`PAGE` sequences wide, so a job's entries among 100,000 cost at most
100 requests more than there are entries of it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import APIError, NoStreamResponseError, NotFoundError

from anarchon.audit import AUDIT_KEEP
from anarchon.options import check_job_name

from ._names import audit_root, audit_stream

__all__ = ["AuditMixin"]

#: Sequences per window while reading one job's entries.
PAGE = 1000
#: "stream name already in use": another instance created it first.
_NAME_IN_USE = 10058


class AuditMixin:
    """Mixed into :class:`~anarchon_nats.NatsBackend`."""

    stream: str
    prefix: str
    replicas: int | None
    _nc: Client | None
    #: How many entries the stream keeps (a test may lower it before the first append).
    audit_keep: int = AUDIT_KEEP
    #: The JetStream context the audit stream was made ready on (a new connection checks again).
    _audit_js: JetStreamContext | None = None

    if TYPE_CHECKING:  # the backend's own, used here

        def _jetstream(self) -> JetStreamContext: ...

    async def _audit_create(self, js: JetStreamContext) -> None:
        if self._audit_js is js:
            return
        name = audit_stream(self.stream, self.prefix)
        try:
            await js.stream_info(name)
        except NotFoundError:
            replicas = self.replicas
            if replicas is None:  # as the stored schedules' stream: the replicas of the backend's stream
                with contextlib.suppress(NotFoundError):
                    replicas = (await js.stream_info(self.stream)).config.num_replicas
            config = StreamConfig(
                name=name,
                description="anarchon: the audit trail, one message per entry",
                subjects=[f"{audit_root(self.stream, self.prefix)}.>"],
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.FILE,
                discard=DiscardPolicy.OLD,
                max_msgs=self.audit_keep,
                num_replicas=replicas or 1,
            )
            try:
                await js.add_stream(config)
            except APIError as exc:
                if exc.err_code != _NAME_IN_USE:
                    raise
        self._audit_js = js

    async def audit_append(self, job: str, entry: str) -> int:
        subject = f"{audit_root(self.stream, self.prefix)}.{check_job_name(job)}"
        name = audit_stream(self.stream, self.prefix)
        for last_try in (False, True):
            js = self._jetstream()
            await self._audit_create(js)
            try:
                ack = await js.publish(subject, entry.encode(), stream=name)
            except NoStreamResponseError:
                self._audit_js = None  # the stream was deleted: create it again, once
                if last_try:
                    raise
                continue
            return int(ack.seq)
        raise AssertionError("unreachable")

    async def audit_entries(
        self, *, limit: int, before_id: int | None = None, job: str | None = None
    ) -> list[tuple[int, str]]:
        js = self._jetstream()
        name = audit_stream(self.stream, self.prefix)
        root = audit_root(self.stream, self.prefix)
        subject = f"{root}.{check_job_name(job)}" if job is not None else f"{root}.>"
        try:
            state = (await js.stream_info(name)).state
        except NotFoundError:  # nothing was ever recorded in this namespace
            return []
        first, top = int(state.first_seq or 0), int(state.last_seq or 0)
        if before_id is not None:
            top = min(top, before_id - 1)
        out: list[tuple[int, str]] = []
        while top >= max(first, 1) and len(out) < limit:
            start = max(first, 1, top - (limit - len(out) if job is None else PAGE) + 1)
            found: list[tuple[int, str]] = []
            seq = start
            while True:
                try:
                    msg = await js.get_msg(name, seq=seq, subject=subject, next=True)
                except NotFoundError:  # nothing on the subject from seq on
                    break
                if msg.seq is None or msg.seq > top:
                    break
                found.append((int(msg.seq), (msg.data or b"").decode("utf-8", "replace")))
                seq = int(msg.seq) + 1
            out.extend(reversed(found))
            top = start - 1
        return out[:limit]
