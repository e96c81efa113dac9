"""RabbitMQBackend: a claim backend on per-run gate queues and publisher confirms."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import unquote, urlsplit

import aio_pika
import aio_pika.abc
from aiormq.exceptions import (
    ChannelNotFoundEntity,
    ChannelPreconditionFailed,
    PublishError,
)
from pamqp import commands as spec

from anarchon.backend import Backend, Capabilities, Claim, ClaimResult, Grant, Outcome
from anarchon.errors import AnarchonError, BackendUnavailableError, InvalidJobError
from anarchon.options import JobOptions, check_history_limit, check_job_name
from anarchon.run import Run

from ._arguments import difference
from ._channels import ChannelPool
from ._gate import claim_gate
from ._guarantees import GuaranteesMixin
from ._link import Link
from ._names import check_prefix, check_slot_ttl_ms, gate_arguments, gate_queue, history_queue
from ._records import encode_record, fold, read_stream, stream_arguments
from ._url import read_amqp_url, redact_amqp

if TYPE_CHECKING:
    from anarchon.job import Job

__all__ = ["ForeignQueueError", "RabbitMQBackend"]

log = logging.getLogger("anarchon.rabbitmq")

CONNECT_TIMEOUT_S = 10.0
#: Longest wait for one broker answer; past it a claim is UNKNOWN.
OPERATION_TIMEOUT_S = 30.0
#: Claims (and history writes) in flight at once, one confirm channel each.
POOL_SIZE = 32
#: A won token is remembered this long after the run's last possible claim.
_REMEMBER_SLACK_MS = 60_000
#: A stream is left alone this long after it was first declared: RabbitMQ 3.10
#: closes the connection that touches a stream whose creation is under way.
STREAM_SETTLE_S = 0.25
#: Tries of one history write; a lost records connection is reopened between them.
_RECORD_ATTEMPTS = 3
#: Once the claims connection is back, slots due before it was lost, or this soon after, are not claimed:
#: the loss may have been the broker's restart, which can forget their gates (clocks are taken to agree
#: within this).
RESTART_MARGIN_MS = 1_000
#: A history stream's arguments that follow the first instance's history_size, so may differ.
_STREAM_SIZES = frozenset({"x-max-length-bytes", "x-stream-max-segment-size-bytes"})


class ForeignQueueError(AnarchonError, RuntimeError):
    """A queue anarchon needs exists with arguments it cannot work with (declared by someone else)."""


#: Streams, which hold each job's history, arrived in RabbitMQ 3.9.
MIN_BROKER_VERSION = (3, 9)
_VERSION = re.compile(r"\s*(\d+)\.(\d+)")


def _older_than_supported(version: str | None) -> bool:
    """Whether a broker's ``version`` property names a release before 3.9.

    A version missing or in a form not understood is let through: a wrong
    refusal would stop a working scheduler, while a real 3.8 still fails,
    later and less clearly, when its history stream is declared.
    """
    match = _VERSION.match(version) if version is not None else None
    return match is not None and (int(match[1]), int(match[2])) < MIN_BROKER_VERSION


def _broker_version(connection: aio_pika.abc.AbstractConnection) -> str | None:
    """The ``version`` the broker announced when the connection opened (aiormq keeps it)."""
    underlay = getattr(getattr(connection, "transport", None), "connection", None)
    properties = getattr(underlay, "server_properties", None) or {}
    version = properties.get("version", properties.get(b"version"))
    if isinstance(version, bytes):
        return version.decode("utf-8", "replace")
    return version if isinstance(version, str) else None


@dataclass
class _Won:
    grant: Grant
    until_ms: int
    finished: bool = False


class RabbitMQBackend(GuaranteesMixin, Backend):
    """Claim-only backend on RabbitMQ >= 3.9 (``amqp://``, ``amqps://``).

    Each run has a gate queue, ``<prefix><job>.slot.<slot_ms>`` (manual runs:
    ``<prefix><job>.manual.<slot_ms>``), holding one message and rejecting the
    rest; the instance whose publish the broker acks runs the slot. History
    lives in a stream queue per job, ``<prefix><job>.history``.

    A ``connection`` passed in stays yours: the backend opens channels on it
    and never closes it.

    The URL's query may set the seed's options, ``prefix`` and
    ``slot_ttl_ms`` (``amqp://rabbit/?prefix=billing.cron.``); an argument
    left at its default gives way to the URL, one that contradicts it is
    refused. Other keys must be ones aio-pika reads, or are refused.
    """

    name: ClassVar[str] = "rabbitmq"
    url_schemes: ClassVar[tuple[str, ...]] = ("amqp", "amqps")
    capabilities: ClassVar[Capabilities] = Capabilities(
        lease=False, history_ttl=False, server_clock=False, idempotent_claim=True, multi_process=True, guarantees=True
    )
    #: Slots due before the claims connection dropped, or this soon after, are not claimed again.
    restart_margin_ms: ClassVar[int] = RESTART_MARGIN_MS

    def __init__(
        self,
        url: str = "amqp://localhost",
        connection: aio_pika.abc.AbstractConnection | None = None,
        prefix: str = "cron.",
        slot_ttl_ms: int = 300_000,
    ) -> None:
        found = read_amqp_url(url)
        prefix = found.pick("prefix", prefix, "cron.")
        slot_ttl_ms = found.pick("slot_ttl_ms", slot_ttl_ms, 300_000)
        if connection is not None and not isinstance(connection, aio_pika.abc.AbstractConnection):
            raise TypeError(
                f"connection={connection!r} must be an aio-pika connection (aio_pika.connect_robust(...)), "
                "or None to let the backend connect to url"
            )
        self.url = found.url
        self.prefix = check_prefix(prefix)
        self.slot_ttl_ms = check_slot_ttl_ms(slot_ttl_ms)
        self._given = connection
        self._gate_arguments = gate_arguments(self.slot_ttl_ms)
        self._claims = Link(lambda: self._connect("claims"), POOL_SIZE, connection)
        self._records = Link(lambda: self._connect("history"), POOL_SIZE, connection)
        #: History stream -> when it may be used (monotonic), once declared.
        self._streams: dict[str, float] = {}
        self._declaring: dict[str, asyncio.Task[None]] = {}
        self._won: OrderedDict[str, _Won] = OrderedDict()
        self._history_sizes: dict[str, int] = {}

    @classmethod
    def from_url(cls, url: str) -> RabbitMQBackend:
        return cls(url=url)

    def __repr__(self) -> str:
        where = "connection=<caller's connection>" if self._given is not None else f"url={redact_amqp(self.url)!r}"
        return f"RabbitMQBackend({where}, prefix={self.prefix!r}, slot_ttl_ms={self.slot_ttl_ms})"

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        (claims, _), (records, _) = await asyncio.gather(self._claims.get(), self._records.get())
        for connection in (claims, records):
            version = _broker_version(connection)
            if _older_than_supported(version):
                await self.close()
                where = "behind the given connection" if self._given is not None else f"at {redact_amqp(self.url)}"
                raise BackendUnavailableError(
                    f"RabbitMQ {where} is version {version}, but RabbitMQBackend needs RabbitMQ 3.9 or newer: "
                    "each job's history is a stream queue, and streams arrived in 3.9; upgrade the broker to 3.9 "
                    "or newer, or use a backend without this need (Redis, PostgreSQL or SQLite)"
                )

    async def close(self) -> None:
        for task in self._declaring.values():
            task.cancel()
        self._declaring.clear()
        await asyncio.gather(self._claims.close(), self._records.close())

    async def _connect(self, purpose: str) -> aio_pika.abc.AbstractConnection:
        try:
            return await aio_pika.connect(
                self.url,
                timeout=CONNECT_TIMEOUT_S,
                client_properties={"connection_name": f"anarchon-rabbitmq {purpose} ({self.prefix})"},
            )
        except Exception as exc:
            raise BackendUnavailableError(
                f"cannot connect to RabbitMQ at {redact_amqp(self.url)}: {self._scrub(exc)}; check that the "
                "broker runs and the URL, user and password are right"
            ) from None

    def _scrub(self, exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}"
        password = urlsplit(self.url).password
        for form in {password, unquote(password)} if password else ():
            text = text.replace(form, "***")
        return text

    # -- jobs ----------------------------------------------------------------

    def check_job(self, job: Job) -> None:
        opts: JobOptions = job.options
        if opts.jitter_ms + opts.max_late_ms >= self.slot_ttl_ms:
            raise InvalidJobError(
                f"job {job.name!r} on backend 'rabbitmq': jitter_ms + max_late_ms = {opts.jitter_ms} + "
                f"{opts.max_late_ms} = {opts.jitter_ms + opts.max_late_ms} ms must be shorter than "
                f"slot_ttl_ms={self.slot_ttl_ms}, or a very late instance could run a slot again after its "
                "gate queue expired; lower max_late_ms or jitter_ms, or raise slot_ttl_ms "
                "(RabbitMQBackend(slot_ttl_ms=...))",
                option="max_late_ms",
                value=opts.max_late_ms,
            )

    async def prepare(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self._history_sizes[job.name] = job.options.history_size
        await asyncio.gather(*(self._ensure_stream(job.name) for job in jobs))

    # -- claiming --------------------------------------------------------------

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        _, pool = await self._claims.get()
        self._forget_old()
        answers = await asyncio.gather(*(self._claim_one(pool, c) for c in claims), return_exceptions=True)
        failures = [a for a in answers if isinstance(a, BaseException)]
        if failures and len(failures) == len(answers):
            raise failures[0]
        results: list[ClaimResult] = []
        for c, answer in zip(claims, answers, strict=True):
            if isinstance(answer, BaseException):
                log.error("claim of job %s, slot %s failed: %s; not running it", c.job, c.slot_ms, answer)
                results.append(ClaimResult(Outcome.UNKNOWN))
            else:
                results.append(answer)
        return results

    async def _claim_one(self, pool: ChannelPool, c: Claim) -> ClaimResult:
        known = self._won.get(c.token)
        if known is not None:
            # A retry of a claim this instance won: its first answer, unless the run already ended.
            return ClaimResult(Outcome.LOST) if known.finished else ClaimResult(Outcome.WON, known.grant)
        self._history_sizes[c.job] = c.options.history_size
        if self._maybe_forgotten(c):
            return ClaimResult(Outcome.UNKNOWN)
        queue = gate_queue(self.prefix, c.job, c.slot_ms, manual=c.manual)
        outcome = await claim_gate(pool, queue, self._gate_arguments, c, OPERATION_TIMEOUT_S)
        if outcome is not Outcome.WON:
            return ClaimResult(outcome)
        grant = c.granted()
        opts = c.options
        until = max(c.slot_ms, c.now_ms) + opts.jitter_ms + opts.max_late_ms + _REMEMBER_SLACK_MS
        self._won[c.token] = _Won(grant, until)
        try:
            await self._append(c.job, c.token, c.running())
        except Exception as exc:
            # The gate decided; history is a record of it, not a second referee.
            log.warning(
                "job %s, slot %s: won, but its running record was not written (%s); running it anyway",
                c.job,
                c.slot_ms,
                self._scrub(exc),
            )
        return ClaimResult(Outcome.WON, grant)

    def _maybe_forgotten(self, c: Claim) -> bool:
        """Whether a scheduled slot was due before the claims connection was lost, which it has since got back.

        A broker killed and restarted can come back without the gate queues
        declared in its last moments (seen with RabbitMQ 3.10: a gate won just
        before a kill -9 was missing after the restart, and a claim retried
        from before the outage won it a second time). A lost connection may be
        such a restart, so a slot that may have been decided before it is not
        claimed: the run may be lost, never doubled, as with a lost confirm.
        Slots due later (during the outage) were decided by nobody before it,
        and are claimed as usual.
        """
        lost = self._claims.lost_at_ms
        if c.manual or lost is None or c.slot_ms >= lost + RESTART_MARGIN_MS:
            return False
        log.warning(
            "job %s, slot %s: due before the connection to RabbitMQ was lost; not claimed, since a restarted "
            "broker may have forgotten who won it",
            c.job,
            c.slot_ms,
        )
        return True

    def _forget_old(self) -> None:
        now = time.time_ns() // 1_000_000
        while self._won:
            token, won = next(iter(self._won.items()))
            if won.until_ms > now:
                break
            del self._won[token]

    async def finish(self, grant: Grant, run: Run) -> bool:
        won = self._won.get(grant.token)
        if won is not None:
            won.finished = True
        await self._append(grant.job, grant.token, run)
        return True

    # -- history ---------------------------------------------------------------

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        check_job_name(job)
        check_history_limit(limit)
        queue = history_queue(self.prefix, job)
        await self._settled(queue)
        connection, _ = await self._records.get()
        bodies = await read_stream(connection, queue, OPERATION_TIMEOUT_S)
        size = self._history_sizes.get(job)
        return fold(bodies, min(limit, size) if size else limit, job)

    async def _append(self, job: str, token: str, run: Run) -> None:
        """Write one record; retried on a new connection, since a record twice folds into one run."""
        queue = history_queue(self.prefix, job)
        body = encode_record(token, run)
        props = spec.Basic.Properties(delivery_mode=2, content_type="application/json")
        for attempt in range(1, _RECORD_ATTEMPTS + 1):
            await self._ensure_stream(job)
            await self._settled(queue)
            _, pool = await self._records.get()
            try:
                async with pool.lend() as lent:
                    await lent.raw.basic_publish(
                        body, routing_key=queue, properties=props, mandatory=True, timeout=OPERATION_TIMEOUT_S
                    )
                return
            except PublishError:
                # The stream was deleted (to resize it): declare it again.
                self._streams.pop(queue, None)
                if attempt == _RECORD_ATTEMPTS:
                    raise
            except Exception as exc:
                if attempt == _RECORD_ATTEMPTS:
                    raise
                log.debug("history record for %s not written (%s); trying again", queue, self._scrub(exc))
                await asyncio.sleep(0.1 * attempt)

    async def _settled(self, queue: str) -> None:
        ready_at = self._streams.get(queue)
        if ready_at is not None and ready_at > time.monotonic():
            await asyncio.sleep(ready_at - time.monotonic())

    async def _ensure_stream(self, job: str) -> None:
        queue = history_queue(self.prefix, job)
        if queue in self._streams:
            return
        task = self._declaring.get(queue)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            size = self._history_sizes.get(job, JobOptions.history_size)
            task = asyncio.get_running_loop().create_task(self._declare_stream(queue, size))
            self._declaring[queue] = task
        await asyncio.shield(task)
        self._declaring.pop(queue, None)

    async def _declare_stream(self, queue: str, history_size: int) -> None:
        """Declare the job's history stream; one that exists is used only if it is a stream of ours.

        Its sizes may differ (another instance's ``history_size``: the seed
        says the first size stays), so they are adopted from the broker's
        answer; any other difference (a classic queue of that name) is refused.
        """
        arguments = stream_arguments(history_size)
        for _ in range(6):
            _, pool = await self._records.get()
            async with pool.lend() as lent:
                try:
                    await lent.raw.queue_declare(queue, durable=True, arguments=arguments, timeout=OPERATION_TIMEOUT_S)
                except ChannelPreconditionFailed as exc:
                    lent.discard()
                    found = difference(exc)
                    size = found.integer() if found is not None and found.argument in _STREAM_SIZES else None
                    if found is None or size is None:
                        raise ForeignQueueError(
                            f"history queue {queue!r} exists, but not as the stream anarchon declares "
                            f"(x-queue-type stream, x-max-length-bytes): {exc}; it was declared by someone else "
                            "or is a classic queue. Delete it (its messages are lost) or use another prefix="
                        ) from exc
                    arguments[found.argument] = size
                    log.info(
                        "history stream %s exists with %s=%s; using that (delete it to resize, which deletes "
                        "that job's history)",
                        queue,
                        found.argument,
                        size,
                    )
                    continue
                except ChannelNotFoundEntity:
                    lent.discard()
                    continue
            self._streams[queue] = time.monotonic() + STREAM_SETTLE_S
            return
        raise BackendUnavailableError(f"history stream {queue} could not be declared; try again later")
