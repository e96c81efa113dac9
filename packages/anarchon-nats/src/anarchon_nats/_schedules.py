"""Stored schedules on NATS: one stream per namespace, one message per change.

Where: the stream ``<stream>_schedules_<digest>`` (the digest: the first 12
hex digits of the SHA-256 of the prefix, so every namespace has a stream and a
counter of its own), subjects ``$ANARCHON.<that stream>.<schedule name>``
(``$ANARCHON`` cannot begin a checked prefix, so no backend's ``<prefix>>``
stream overlaps it). It is created by the first change, never by a look:
file storage, limits retention, discard old, at most
:data:`~anarchon.schedules.LOG_KEEP` messages per subject, and the replicas of
the backend's stream (``replicas=`` when given, else those its stream has);
``replicas=`` given later updates it as it updates the backend's stream.

What: each change is **one message** on its schedule's subject, JSON
``{"v": 1, "record": <text, null for a removal>, "change": <text>}``, and its
stream sequence is the change's revision. The record, the log entry and the
revision are therefore one write that happens whole or not at all: a reader
never sees a revision without its record, whatever dies when. The counter is
the stream's last sequence (it never goes back, purges included); a
schedule's state is the last message on its subject (a tombstone when its
record is null); its log is the subject's messages, the stream trimming each
subject to the last ``LOG_KEEP``.

The check (compare-and-set): the publish carries
``Nats-Expected-Last-Subject-Sequence: S``, where ``S`` is the sequence of the
message the writer decided on (0: the subject holds none). The stream (its
leader, in a cluster) stores the message only if the subject's last message
is still ``S``; otherwise it answers "wrong last sequence" (10071) and stores
nothing. Of writers racing over one state exactly one is stored. The decision
needs to know what ``S`` holds, which costs a read, except where it is known:

* a write over any revision (``expect=None``) with a record: no check, one publish;
* an add (``expect=0``): published expecting an empty subject, one publish; a
  name with a tombstone (or a record) is refused by the stream, then read and
  decided as below;
* a change over revision ``R`` that this backend object read or wrote as a live
  record (``schedule()`` just before, as ``Schedules.set()`` and ``remove()``
  do, or its own last change): one publish, since message ``R`` of that subject
  cannot change (a removal's revision must be refused: only a live record's is
  taken without a read);
* otherwise: read the subject's last message (one ``STREAM.MSG.GET``), decide
  as the reference does (refuse: :class:`~anarchon.errors.ScheduleConflictError`
  with nothing written), publish expecting it; refused by the stream, read
  again and decide again.

Reading: :meth:`schedules_revision` is one ``STREAM.INFO`` (its last
sequence; 0 while the stream does not exist). :meth:`schedules_since` asks the
same first, returns ``[]`` when nothing came after the revision, else reads
the messages after it with one short-lived consumer (``since(0)``: the last
message of each subject) and keeps the last change of each name. The consumer
has flow control, so the server stays within its flow-control window of the
reader: without it a big read (300,000 changes, 117 MB) outran the client by
the 64 MB a server lets wait for one, and the server closed the connection. A
consumer sequence skipped (a message lost on the way) fails the read rather
than return an older record.
:meth:`schedule` is one ``STREAM.MSG.GET`` of the subject's last message;
:meth:`schedule_log` one consumer on the subject.

Tombstones older than :data:`~anarchon.schedules.TOMBSTONE_MS` go with their
logs when a reader meets them in ``since(0)`` (each instance's start, every
``Schedules.list()``): the subject is purged up to the tombstone's sequence
only, so a schedule added again meanwhile stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, Header
from nats.js.errors import APIError, NoStreamResponseError, NotFoundError

from anarchon.errors import ScheduleConflictError
from anarchon.schedules import LOG_KEEP, REUSE_AFTER_MS, TOMBSTONE_MS

from ._names import claims_subject, job_filter, schedule_subject, schedules_root, schedules_stream
from ._records import decode_claim
from ._stream import StreamNeeds, ensure_stream

__all__ = ["SchedulesMixin"]

log = logging.getLogger("anarchon.nats")

#: A read of changes that stalls this long is given up.
READ_TIMEOUT_S = 5.0
#: The idle heartbeat of a read's consumer (flow control needs one; it also says a stalled read's reply subject).
HEARTBEAT_S = 1.0
#: The stream's answer to a publish whose expected last subject sequence is not the subject's.
WRONG_LAST_SEQUENCE = 10071
#: Reads and publishes of one change before it is refused as contended (each retry means another writer won).
CAS_TRIES = 20
#: How many (name, revision) of live records one backend object remembers (about a megabyte at most).
KNOWN_LIVE = 10_000
#: The schedules stream's duplicate window (no message IDs are used; the server's default).
DUPLICATE_WINDOW_MS = 120_000
#: The status of a consumer's control messages (flow control, heartbeats).
CONTROL_STATUS = "100"
#: Read the subject's last message before publishing (the first guess of put_schedule).
_READ = -1

#: A message's ``(record, change)``: see :func:`decode_change`.
Held = tuple[str | None, str | None]


@dataclass(frozen=True)
class _Change:
    """One message of the schedules stream as read."""

    name: str
    revision: int
    #: The record; ``None``: a tombstone. A message this version cannot read is a record of its raw text
    #: (it is the schedule's state all the same; the instances report it unreadable).
    record: str | None
    #: The change text; ``None`` for a message this version cannot read.
    change: str | None
    at_ms: int


def encode_change(record: str | None, change: str) -> bytes:
    return json.dumps({"v": 1, "record": record, "change": change}, separators=(",", ":")).encode()


def decode_change(data: bytes | None) -> Held:
    """``(record, change)`` of a message; a foreign one is a record of its text and no change."""
    raw = data or b""
    try:
        held = json.loads(raw)
    except ValueError:
        held = None
    if isinstance(held, dict) and held.get("v") == 1:
        record, change = held.get("record"), held.get("change")
        if (record is None or isinstance(record, str)) and isinstance(change, str):
            return record, change
    log.warning("stored schedules: a message this version cannot read: %r", raw[:120])
    return raw.decode(errors="replace"), None


class SchedulesMixin:
    """Mixed into :class:`~anarchon_nats.NatsBackend`."""

    stream: str
    prefix: str
    replicas: int | None

    if TYPE_CHECKING:  # the backend's own, used here

        def _jetstream(self) -> JetStreamContext: ...

    _nc: Client | None
    #: The JetStream context the schedules stream was made ready on (a new connection checks again).
    _schedules_js: JetStreamContext | None = None
    #: name -> a revision known to be a live record of it (message ``revision`` of its subject).
    _schedules_known: dict[str, int] | None = None

    @property
    def _schedules_stream(self) -> str:
        return schedules_stream(self.stream, self.prefix)

    @property
    def _schedules_live(self) -> dict[str, int]:
        if self._schedules_known is None:
            self._schedules_known = {}
        return self._schedules_known

    async def _schedules_create(self, js: JetStreamContext) -> None:
        """Create the stream, or bring it to what it needs, once per connection (one lookup when it fits)."""
        if self._schedules_js is js:
            return
        replicas = self.replicas
        if replicas is None:  # a new schedules stream gets the replicas of the backend's stream
            with contextlib.suppress(NotFoundError):
                replicas = (await js.stream_info(self.stream)).config.num_replicas
        await ensure_stream(
            js,
            StreamNeeds(
                name=self._schedules_stream,
                subject=f"{schedules_root(self.stream, self.prefix)}.>",
                duplicate_window_ms=DUPLICATE_WINDOW_MS,
                per_subject=LOG_KEEP,
                replicas=self.replicas,
                description="anarchon: stored schedules, one message per change",
                new_replicas=replicas,
            ),
        )
        self._schedules_js = js

    def _known_live(self, name: str, revision: int) -> None:
        self._schedules_live.pop(name, None)
        self._schedules_live[name] = revision
        if len(self._schedules_live) > KNOWN_LIVE:
            del self._schedules_live[next(iter(self._schedules_live))]

    # -- changing ---------------------------------------------------------------------

    async def put_schedule(self, name: str, record: str | None, *, expect: int | None, change: str) -> int:
        subject = schedule_subject(self.stream, self.prefix, name)  # checks the name
        js = self._jetstream()
        await self._schedules_create(js)
        payload = encode_change(record, change)
        if expect is None:
            last: int | None = None if record is not None else _READ
        elif expect == 0:
            last = 0
        else:
            last = expect if self._schedules_live.get(name) == expect else _READ
        current = 0
        for _ in range(CAS_TRIES):
            if last == _READ:
                seq, state = await self._last_change(js, subject)
                current = seq if state is not None and state[0] is not None else 0
                if (expect is not None and expect != current) or (record is None and current == 0):
                    raise ScheduleConflictError(name, expect, current)
                last = seq
            headers = {Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value: str(last)} if last is not None else None
            try:
                ack = await js.publish(subject, payload, stream=self._schedules_stream, headers=headers)
            except APIError as exc:
                if exc.err_code != WRONG_LAST_SEQUENCE:
                    raise
                last = _READ  # another change came first: read what it left and decide again
                continue
            except NoStreamResponseError:
                self._schedules_js = None  # the stream was deleted: the next change creates it again
                self._schedules_live.clear()
                raise
            if record is None:
                self._schedules_live.pop(name, None)
            else:
                self._known_live(name, ack.seq)
            return int(ack.seq)
        raise ScheduleConflictError(name, expect, current)

    async def _last_change(self, js: JetStreamContext, subject: str) -> tuple[int, Held | None]:
        """The sequence of the subject's last message (0: none) and its ``(record, change)``."""
        try:
            msg = await js.get_msg(self._schedules_stream, subject=subject)
        except NotFoundError:  # no message on the subject (10037), or no stream (10059)
            return 0, None
        return int(msg.seq or 0), decode_change(msg.data)

    # -- reading ------------------------------------------------------------------------

    async def schedules_revision(self) -> int:
        try:
            info = await self._jetstream().stream_info(self._schedules_stream)
        except NotFoundError:  # no change was ever made in this namespace
            return 0
        return int(info.state.last_seq or 0)

    async def schedules_since(self, revision: int) -> list[tuple[str, str | None, int]]:
        if await self.schedules_revision() <= revision:
            return []  # nothing after it: one small read
        root = schedules_root(self.stream, self.prefix)
        if revision == 0:
            changes = await self._read_changes(f"{root}.>", DeliverPolicy.LAST_PER_SUBJECT)
        else:
            changes = await self._read_changes(f"{root}.>", DeliverPolicy.BY_START_SEQUENCE, revision + 1)
        last: dict[str, _Change] = {}
        for c in changes:
            held = last.get(c.name)
            if held is None or held.revision < c.revision:
                last[c.name] = c
        if revision == 0:
            await self._purge_tombstones([c for c in last.values() if c.record is None])
        rows = sorted(last.values(), key=lambda c: c.revision)
        return [(c.name, c.record, c.revision) for c in rows if c.record is not None or revision]

    async def schedule(self, name: str) -> tuple[str, int] | None:
        subject = schedule_subject(self.stream, self.prefix, name)
        seq, state = await self._last_change(self._jetstream(), subject)
        if state is None or state[0] is None:
            return None
        if state[1] is not None:
            self._known_live(name, seq)
        return state[0], seq

    async def schedule_log(self, name: str) -> list[tuple[int, str]]:
        subject = schedule_subject(self.stream, self.prefix, name)
        changes = await self._read_changes(subject, DeliverPolicy.ALL)
        return [(c.revision, c.change) for c in changes if c.change is not None][-LOG_KEEP:]

    async def _read_changes(self, subject: str, policy: DeliverPolicy, start: int | None = None) -> list[_Change]:
        """The stream's messages on ``subject`` that ``policy`` delivers, in stream order, by one consumer.

        The consumer's count of pending messages (at its creation, then with each message) says
        when all were read, so an empty read does not wait for anything. The messages are taken
        by the subscription's callback: ``next_msg`` costs a task and a timer per message, which
        was two thirds of reading 100,000 schedules.
        """
        js = self._jetstream()
        assert self._nc is not None
        nc = self._nc
        reader = _Reader(nc, len(schedules_root(self.stream, self.prefix)) + 1)
        inbox = nc.new_inbox()
        # No client-side limit: a message dropped as "slow consumer" would be a schedule missed (the
        # flow control bounds what waits here, and the reader refuses a gap anyway).
        sub = await nc.subscribe(inbox, cb=reader.take, pending_msgs_limit=0, pending_bytes_limit=0)
        consumer: str | None = None
        try:
            try:
                info = await js.add_consumer(
                    self._schedules_stream,
                    ConsumerConfig(
                        deliver_subject=inbox,
                        deliver_policy=policy,
                        opt_start_seq=start,
                        ack_policy=AckPolicy.NONE,
                        filter_subject=subject,
                        mem_storage=True,
                        num_replicas=1,
                        inactive_threshold=READ_TIMEOUT_S,
                        # Without it the server sends as fast as it reads the stream, and closes the whole
                        # connection once 64 MB wait for this client (seen reading 300,000 changes).
                        flow_control=True,
                        idle_heartbeat=HEARTBEAT_S,
                    ),
                )
            except NotFoundError:  # no stream: nothing was ever stored
                return []
            consumer = info.name
            if info.num_pending:
                await reader.finished()
            return reader.out
        finally:
            await sub.unsubscribe()
            if consumer is not None:
                try:
                    await js.delete_consumer(self._schedules_stream, consumer)
                except Exception as exc:  # it expires by itself after inactive_threshold
                    log.debug("deleting schedules consumer %s failed: %s", consumer, exc)

    async def forget_removed(self, older_than_ms: int) -> list[str]:
        """Old tombstones go with their logs, and each name's claims and results unless it is in use.

        NATS keeps no lease, so a name is in use again when its last claim is of a slot more than
        ``REUSE_AFTER_MS`` after the removal. The tombstone times are the server's, the cutoff this
        host's clock, as the tombstone purge's own.
        """
        if await self.schedules_revision() == 0:
            return []
        root = schedules_root(self.stream, self.prefix)
        cutoff = time.time_ns() // 1_000_000 - older_than_ms
        changes = await self._read_changes(f"{root}.>", DeliverPolicy.LAST_PER_SUBJECT)
        old = [c for c in changes if c.record is None and c.at_ms <= cutoff]
        js = self._jetstream()
        forgotten = []
        for t in old:
            try:
                claim = decode_claim((await js.get_last_msg(self.stream, claims_subject(self.prefix, t.name))).data)
            except NotFoundError:  # never claimed, or purged already
                claim = None
            if claim is None or claim.slot_ms <= t.at_ms + REUSE_AFTER_MS:
                await js.purge_stream(self.stream, subject=job_filter(self.prefix, t.name))
                forgotten.append(t.name)
        await self._purge_tombstones(old, cutoff + 1)
        return forgotten

    async def _purge_tombstones(self, tombstones: list[_Change], cutoff: int | None = None) -> None:
        """Purge the subjects of tombstones older than ``cutoff`` (default ``TOMBSTONE_MS`` ago) up to the tombstone.

        Only up to the tombstone's own sequence: a schedule added again after the
        read stays, and a writer that decided on the tombstone is refused by the
        stream and decides again.
        """
        cutoff = time.time_ns() // 1_000_000 - TOMBSTONE_MS if cutoff is None else cutoff
        js = self._jetstream()
        for t in tombstones:
            if t.at_ms >= cutoff:
                continue
            subject = schedule_subject(self.stream, self.prefix, t.name)
            with contextlib.suppress(APIError, nats.errors.Error):  # a later reader purges it
                await js.purge_stream(self._schedules_stream, subject=subject, seq=t.revision + 1)


class _Reader:
    """Takes one consumer's messages in the subscription's callback, until the one with nothing pending after it.

    It answers the consumer's flow control once it has taken every message before it, so
    the server never gets far ahead of it.
    """

    def __init__(self, nc: Client, skip: int) -> None:
        self.nc = nc
        self.skip = skip  # the length of the subjects' root and its dot: the rest is the name
        self.out: list[_Change] = []
        self.delivered = 0  # the consumer sequence of the last message taken
        self.done = asyncio.Event()
        self.error: Exception | None = None

    async def take(self, msg: Msg) -> None:
        if not msg.data and msg.headers and Header.STATUS.value in msg.headers:  # no stream message
            # Flow control (its reply subject), or a heartbeat (one that says the consumer stalled on a lost reply).
            answer = msg.reply or msg.headers.get(Header.CONSUMER_STALLED.value)
            if answer and msg.headers[Header.STATUS.value] == CONTROL_STATUS and not self.done.is_set():
                await self.nc.publish(answer)
            return
        if self.done.is_set():  # messages stored after the last one asked for
            return
        try:
            meta = msg.metadata
            if meta.sequence.consumer != self.delivered + 1:  # no acks, so no redelivery: a gap is a lost message
                raise nats.errors.Error(
                    f"stored schedules: message {self.delivered + 1} of the read is missing "
                    f"(got {meta.sequence.consumer}); reading again"
                )
            self.delivered = meta.sequence.consumer
            name = msg.subject[self.skip :]
            if name and "." not in name:  # else not a subject this backend writes
                record, change = decode_change(msg.data)
                at_ms = int(meta.timestamp.timestamp() * 1000)
                self.out.append(_Change(name, int(meta.sequence.stream), record, change, at_ms))
            if meta.num_pending == 0:
                self.done.set()
        except Exception as exc:  # the subscription would only log it: the reader raises it
            self.error = exc
            self.done.set()

    async def finished(self) -> None:
        """Wait for the last message; ``TimeoutError`` when none came for ``READ_TIMEOUT_S``."""
        taken = -1
        while not self.done.is_set():
            if self.delivered == taken:
                raise nats.errors.TimeoutError
            taken = self.delivered
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.done.wait(), READ_TIMEOUT_S)
        if self.error is not None:
            raise self.error
