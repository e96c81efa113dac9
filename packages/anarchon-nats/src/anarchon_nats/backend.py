"""NatsBackend: one instance wins each slot through JetStream de-duplication.

Every instance publishes its claim for a slot to ``<prefix><job>.claims``
with the header ``Nats-Msg-Id: <job>:<slot>``. Within the stream's duplicate
window JetStream stores only the first message with an ID and answers every
later one ``duplicate``; the stream (its leader, in a cluster) orders the
publishes, so exactly one is first. On a duplicate the instance reads the
stored claim and compares tokens, so a claim the client itself retried (its
first answer was lost) is still recognised as its own.

It is a claim backend: no lease, so no backup runners, overlap protection,
catch-up or hand-over, and a run whose runner died stays ``running``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, PubAck
from nats.js.errors import NotFoundError, ServiceUnavailableError

from anarchon.backend import Backend, Capabilities, Claim, ClaimResult, Grant, Outcome
from anarchon.batching import Batcher
from anarchon.errors import BackendUnavailableError, InvalidJobError
from anarchon.options import check_history_limit, check_job_name

from ._audit import AuditMixin
from ._full import Outage
from ._guarantees import GuaranteesMixin
from ._names import (
    check_positive_int,
    check_prefix,
    check_stream_name,
    claim_msg_id,
    claims_subject,
    job_filter,
    redact_servers,
    result_msg_id,
    results_subject,
)
from ._notify import NotifyMixin
from ._records import decode_claim, encode_claim, encode_result, join_history
from ._registry import RegistryMixin
from ._requests import Requests, pub_ack, stored_data
from ._schedules import SchedulesMixin
from ._stream import StreamNeeds, ensure_stream
from ._url import check_server, connect_credentials, is_refusal, read_nats_url
from ._version import old_server_warning

if TYPE_CHECKING:
    from anarchon.job import Job
    from anarchon.run import Run

__all__ = ["NatsBackend"]

log = logging.getLogger("anarchon.nats")

#: How long start() tries to reach a server before giving up.
CONNECT_TIMEOUT_S = 10.0
#: How long one JetStream request (a claim's ack, a stream lookup) may take.
REQUEST_TIMEOUT_S = 5.0
#: A history read that stalls this long is given up.
READ_TIMEOUT_S = 5.0

_MSG_ID = "Nats-Msg-Id"
#: Claims and results awaiting their acknowledgement, at most (as nats-py's publish_async allowed).
MAX_PENDING = 4000


class NatsBackend(GuaranteesMixin, RegistryMixin, SchedulesMixin, NotifyMixin, AuditMixin, Backend):
    """A claim backend on NATS JetStream (``nats://``, ``tls://``).

    ``servers`` is one URL or a list (one string may hold several servers
    separated by commas, and the options in its query, as :meth:`from_url`
    reads it); ``connection`` is your own connected
    ``nats.aio.client.Client``, which then stays yours (the backend never
    closes or drains it, and ``servers`` is ignored). See the package README
    for the stream it creates and the limits to know.
    """

    name: ClassVar[str] = "nats"
    url_schemes: ClassVar[tuple[str, ...]] = ("nats", "tls")
    capabilities: ClassVar[Capabilities] = Capabilities(
        lease=False,
        history_ttl=False,
        server_clock=False,
        idempotent_claim=True,
        multi_process=True,
        registry=True,
        guarantees=True,
        schedules=True,
        schedule_notify=True,
        audit=True,
        decided_notify=True,
    )

    def __init__(
        self,
        servers: str | Sequence[str] = "nats://localhost:4222",
        connection: Client | None = None,
        stream: str = "CRON",
        prefix: str = "cron.",
        duplicate_window_ms: int = 300_000,
        history_size: int = 1000,
        replicas: int | None = None,
    ) -> None:
        if isinstance(servers, str):
            server_list, found = read_nats_url(servers)
            stream = found.pick("stream", stream, "CRON")
            prefix = found.pick("prefix", prefix, "cron.")
            duplicate_window_ms = found.pick("duplicate_window_ms", duplicate_window_ms, 300_000)
            history_size = found.pick("history_size", history_size, 1000)
            replicas = found.pick("replicas", replicas, None)
        elif isinstance(servers, Sequence) and servers and all(isinstance(s, str) and s for s in servers):
            server_list = [check_server(s) for s in servers]
        else:
            raise ValueError(
                "servers must be one URL or a non-empty list of URLs such as 'nats://nats.internal:4222'; "
                f"got a {type(servers).__name__}"
            )
        self.servers: list[str] = server_list
        self.connection = connection
        self.stream = check_stream_name(stream)
        self.prefix = check_prefix(prefix)
        self.duplicate_window_ms = check_positive_int("duplicate_window_ms", duplicate_window_ms, 300_000)
        self.history_size = check_positive_int("history_size", history_size, 1000)
        if replicas is not None:
            check_positive_int("replicas", replicas, 3)
            if replicas > 5:
                raise ValueError(f"replicas={replicas!r}: JetStream allows 1 to 5 replicas; for example replicas=3")
        self.replicas = replicas
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._kv = None
        self._heads, self._read_heads = {}, {}
        self._per_subject = 0
        self._needed = self.history_size
        self._requests = Requests()
        self._publishes = Requests(max_pending=MAX_PENDING)
        self._outage = Outage(self.stream)
        #: Connected by start_read_only() to a server without this stream: every read raises LookupError.
        self._absent = False
        self._finishes: Batcher[tuple[str, bytes, str]] = Batcher(self._publish_results, in_flight=4)

    @classmethod
    def from_url(cls, url: str) -> NatsBackend:
        """``nats://[user:pass@]host:4222[,nats://host2:4222][?stream=…&prefix=…&…]``.

        Several servers are separated by commas. The query may set ``stream``,
        ``prefix``, ``duplicate_window_ms``, ``history_size`` and ``replicas``
        (see :mod:`._url`).
        """
        return cls(servers=url)

    def __repr__(self) -> str:
        where = "connection=<caller's NATS client>" if self.connection is not None else f"servers={self._where()}"
        return (
            f"NatsBackend({where}, stream={self.stream!r}, prefix={self.prefix!r}, "
            f"duplicate_window_ms={self.duplicate_window_ms}, history_size={self.history_size}, "
            f"replicas={self.replicas!r})"
        )

    def _where(self) -> str:
        shown = redact_servers(self.servers)
        return repr(shown[0] if len(shown) == 1 else shown)

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        if self._absent:
            await self.close()  # a look found no stream; the fleet's start creates it
        if self._js is not None:
            return
        nc = self.connection if self.connection is not None else await self._connect()
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        try:
            config = await ensure_stream(js, self._needs(self._needed))
        except (asyncio.TimeoutError, nats.errors.NoRespondersError, ServiceUnavailableError) as exc:
            await self._drop(nc)
            raise self._no_jetstream(exc) from None
        except BaseException:
            await self._drop(nc)
            raise
        self._nc, self._js = nc, js
        self._per_subject = config.max_msgs_per_subject or 0
        try:
            server = nc.connected_server_version
            version = f"{server.major}.{server.minor}.{server.patch}"
        except ValueError:  # a version string nats-py cannot parse: only a warning is at stake
            version = ""
        if old := old_server_warning(version):
            log.warning("NATS at %s: %s", self._where(), old)

    def _no_jetstream(self, exc: BaseException) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"NATS at {self._where()} did not answer JetStream requests ({type(exc).__name__}); "
            "JetStream must be enabled on the server (nats-server -js), and in a cluster a "
            "JetStream meta leader must be elected"
        )

    async def start_read_only(self) -> None:
        """Connect for a look (``anarchon history``, ``jobs``, ``check``): never create or change the stream.

        A stream that does not exist is one nothing ran under, or a wrong ``stream=``: every
        read then raises ``LookupError`` naming it, rather than creating a stream to answer
        "no runs".
        """
        if self._js is not None:
            return
        nc = self.connection if self.connection is not None else await self._connect()
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        try:
            info = await js.stream_info(self.stream)
        except NotFoundError:
            self._absent = True
        except (asyncio.TimeoutError, nats.errors.NoRespondersError, ServiceUnavailableError) as exc:
            await self._drop(nc)
            raise self._no_jetstream(exc) from None
        except BaseException:
            await self._drop(nc)
            raise
        else:
            self._per_subject = info.config.max_msgs_per_subject or 0
        self._nc, self._js = nc, js

    async def _connect(self) -> Client:
        errors: list[BaseException] = []

        async def on_error(exc: Exception) -> None:
            errors.append(exc)
            log.warning("NATS connection to %s: %s: %s", self._where(), type(exc).__name__, exc)

        async def on_disconnected() -> None:
            if nc.is_closed:
                return
            log.warning("NATS connection to %s lost; reconnecting", self._where())

        async def on_reconnected() -> None:
            log.info("NATS connection to %s restored", self._where())

        nc = Client()
        servers, credentials = connect_credentials(self.servers)
        try:
            await asyncio.wait_for(
                nc.connect(
                    servers=servers,
                    **credentials,  # type: ignore[arg-type]
                    name="anarchon",
                    connect_timeout=2,
                    reconnect_time_wait=1,
                    max_reconnect_attempts=-1,
                    error_cb=on_error,
                    disconnected_cb=on_disconnected,
                    reconnected_cb=on_reconnected,
                ),
                CONNECT_TIMEOUT_S,
            )
        except (asyncio.TimeoutError, OSError, nats.errors.Error) as exc:
            await self._drop(nc)
            # A refused password is what the user must fix, even if later retries only saw resets.
            auth = [e for e in errors if is_refusal(e)]
            cause = auth[0] if auth else (errors[-1] if errors else exc)
            raise BackendUnavailableError(
                f"could not connect to NATS at {self._where()} within {CONNECT_TIMEOUT_S:g} s "
                f"({type(cause).__name__}: {cause}); check that the server runs and the URL, "
                "credentials and TLS settings are right"
            ) from None
        return nc

    async def _drop(self, nc: Client) -> None:
        if nc is not self.connection:
            try:
                await nc.close()
            except Exception as exc:  # closing a half-open client must not hide the real error
                log.debug("closing the NATS client failed: %s", exc)

    async def close(self) -> None:
        if self._js is not None:
            await self._finishes.drain()
        self._outage.state()  # stopped while the stream was full: what it cost is stated now
        await self._close_listener()
        nc, self._nc, self._js, self._kv = self._nc, None, None, None
        self._absent = False
        if nc is not None:
            await self._drop(nc)

    def _jetstream(self) -> JetStreamContext:
        if self._absent:
            raise LookupError(
                f"JetStream stream {self.stream!r} does not exist at {self._where()}: nothing ran under it; "
                "check stream= (and prefix=) in the URL, or start the fleet, which creates it"
            )
        if self._js is None:
            raise RuntimeError("NatsBackend is not started: call start() (the Scheduler does) before using it")
        return self._js

    # -- jobs ------------------------------------------------------------------

    def check_job(self, job: Job) -> None:
        opts = job.options
        late = opts.jitter_ms + opts.max_late_ms
        if late >= self.duplicate_window_ms:
            raise InvalidJobError(
                f"job {job.name!r} on backend 'nats': jitter_ms + max_late_ms = {opts.jitter_ms} + "
                f"{opts.max_late_ms} = {late} ms must be shorter than duplicate_window_ms="
                f"{self.duplicate_window_ms}: outside the window JetStream no longer recognises a repeated "
                "claim, and a very late instance could run the slot again. Lower jitter_ms or max_late_ms, "
                f"or raise NatsBackend(duplicate_window_ms=...) above {late}",
                option="max_late_ms",
                value=opts.max_late_ms,
            )

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Raise the stream's per-subject limit when a job keeps more history than it does."""
        self._needed = max([self._needed, *(job.options.history_size for job in jobs)])
        if self._js is not None and self._needed > self._per_subject:
            config = await ensure_stream(self._js, self._needs(self._needed))
            self._per_subject = config.max_msgs_per_subject or 0

    def _needs(self, per_subject: int) -> StreamNeeds:
        return StreamNeeds(
            name=self.stream,
            subject=f"{self.prefix}>",
            duplicate_window_ms=self.duplicate_window_ms,
            per_subject=per_subject,
            replicas=self.replicas,
        )

    # -- claiming ----------------------------------------------------------------

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Publish every claim, then await the acks: a batch costs about one round trip.

        Raises when any answer was lost (a dropped connection, a timeout) or
        refused (a full stream: one ``StreamFullError`` naming the limit and the
        fix, see :mod:`._full`): the scheduler then retries the batch with the
        same tokens, and a claim that did reach the stream comes back as a
        duplicate carrying our own token.
        """
        if not claims:
            return []
        js = self._jetstream()
        if any(c.options.history_size > self._needed for c in claims):
            await self.prepare([c.spec for c in claims])  # a caller that skipped prepare(): once per increase
        acks = await self._publish_claims(claims)
        await self._outage.check(js, acks, claims)  # raises for any error, a full stream's named once
        stored = {
            i: ack.seq for i, ack in enumerate(acks) if isinstance(ack, PubAck) and ack.duplicate
        }  # BROKER-NOTES: duplicate is None, not False, for a message the stream stored
        found = await self._stored_claims(list(stored.values()))
        owners = dict(zip(stored, found, strict=True))
        results = []
        for i, c in enumerate(claims):
            started = c.now_ms
            if i in owners:
                owner = owners[i]
                if owner is None or owner[0] != c.token:
                    results.append(ClaimResult(Outcome.LOST))
                    continue
                started = owner[1]
            results.append(ClaimResult(Outcome.WON, c.granted(started_at_ms=started)))
        await self._outage.answered(js, acks, claims, won=any(r.won for r in results))  # a full stream: raises
        await self._tell_decided(claims, results)
        return results

    async def _publish_claims(self, claims: Sequence[Claim]) -> list[PubAck | BaseException]:
        return await self._publish_all(
            [
                (claims_subject(self.prefix, c.job), encode_claim(c), claim_msg_id(c.job, c.slot_ms, c.manual))
                for c in claims
            ],
        )

    async def _publish_all(self, messages: Sequence[tuple[str, bytes, str]]) -> list[PubAck | BaseException]:
        """Every message ``(subject, payload, msg id)`` published before any ack is awaited, the acks together.

        One reply subscription and one ``wait`` with one timeout for the batch:
        a task, request and timer per message was, at 1,000 every-second jobs on
        three instances, an overhead that alone outgrew the second. Not nats-py's
        ``publish_async``, which leaves a refused publish unanswered (see
        :mod:`._requests`): each answer here is an ack or the error itself.
        """
        assert self._nc is not None
        requests = [(s, data, {_MSG_ID: msg_id, "Nats-Expected-Stream": self.stream}) for s, data, msg_id in messages]
        return [pub_ack(r) for r in await self._publishes.answers(self._nc, requests, REQUEST_TIMEOUT_S)]

    async def _publish_results(self, messages: Sequence[tuple[str, bytes, str]]) -> list[PubAck | BaseException]:
        """The batcher's send: the finishes of one event-loop turn, published together."""
        js = self._jetstream()
        return await self._outage.results(js, await self._publish_all(messages))

    async def _stored_claims(self, seqs: list[int]) -> list[tuple[str, int] | None]:
        """The token and start time of each claim the stream kept; ``None`` where it is gone (trimmed)."""
        if not seqs:
            return []
        assert self._nc is not None
        subject = f"{self._jetstream()._prefix}.STREAM.MSG.GET.{self.stream}"
        replies = await self._requests.all(
            self._nc, [(subject, b'{"seq":%d}' % seq) for seq in seqs], REQUEST_TIMEOUT_S
        )
        out: list[tuple[str, int] | None] = []
        for reply in replies:
            data = stored_data(reply)
            record = decode_claim(data) if data is not None else None
            out.append((record.token, record.started_at_ms) if record is not None else None)
        return out

    async def finish(self, grant: Grant, run: Run) -> bool:
        """Publish the run's result; a claim backend has no stale owners, so always ``True``."""
        self._jetstream()
        subject, msg_id = results_subject(self.prefix, grant.job), result_msg_id(grant.job, grant.slot_ms, grant.manual)
        await self._finishes.call((subject, encode_result(grant, run), msg_id))
        return True

    # -- history -------------------------------------------------------------------

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        """Reads the job's claims and results with a short-lived consumer and joins them."""
        check_job_name(job)
        if check_history_limit(limit) == 0:
            return []
        js = self._jetstream()
        assert self._nc is not None
        messages = await self._read(self._nc, js, job_filter(self.prefix, job))
        return join_history(messages, limit, job)

    async def _read(self, nc: Client, js: JetStreamContext, subject: str) -> list[tuple[str, bytes | None]]:
        """Every message on ``subject`` in stream order, as ``(last token, payload)`` pairs.

        A short-lived consumer streams them in one go. A cluster missing a
        server may place that consumer on the missing peer (seen with NATS
        2.9), so when it does not answer the messages are read one by one
        from the stream leader instead: slower, but it needs only the stream.
        """
        try:
            return await self._read_by_consumer(nc, js, subject)
        except asyncio.TimeoutError as exc:
            log.info("history consumer on %s did not answer (%s); reading message by message", subject, exc)
            return await self._read_by_get(js, subject)

    async def _read_by_consumer(self, nc: Client, js: JetStreamContext, subject: str) -> list[tuple[str, bytes | None]]:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        consumer: str | None = None
        try:
            info = await js.add_consumer(
                self.stream,
                ConsumerConfig(
                    deliver_subject=inbox,
                    deliver_policy=DeliverPolicy.ALL,
                    ack_policy=AckPolicy.NONE,
                    filter_subject=subject,
                    mem_storage=True,
                    num_replicas=1,
                    inactive_threshold=READ_TIMEOUT_S,
                ),
            )
            consumer = info.name
            out: list[tuple[str, bytes | None]] = []
            pending = info.num_pending or 0
            while pending > 0:
                msg = await sub.next_msg(timeout=READ_TIMEOUT_S)
                if not msg.reply:  # heartbeats and flow control carry no stream message
                    continue
                out.append((msg.subject.rpartition(".")[2], msg.data))
                pending = msg.metadata.num_pending
            return out
        finally:
            await sub.unsubscribe()
            if consumer is not None:
                try:
                    await js.delete_consumer(self.stream, consumer)
                except Exception as exc:  # it expires by itself after inactive_threshold
                    log.debug("deleting history consumer %s failed: %s", consumer, exc)

    async def _read_by_get(self, js: JetStreamContext, subject: str) -> list[tuple[str, bytes | None]]:
        out: list[tuple[str, bytes | None]] = []
        seq = 1
        while True:
            try:
                msg = await js.get_msg(self.stream, seq=seq, subject=subject, next=True)
            except NotFoundError:
                return out
            out.append(((msg.subject or "").rpartition(".")[2], msg.data))
            seq = (msg.seq or seq) + 1
