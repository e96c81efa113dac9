"""RedisBackend: leases in atomic Lua scripts, on one server or a Redis Cluster.

Each claim, renewal, take-over and finish is one script on one job's keys, which share the hash
tag ``{<job>}``; lease expiry is judged on Redis ``TIME`` inside the scripts. The claims due
together go out as one pipeline of ``EVALSHA`` (on a cluster the client sends one pipeline per
node, in parallel). Finishes, hand-overs and history reads come one call per run, often hundreds
at once, so they are gathered into pipelines too (:mod:`._batch`): one connection each, where
redis-py's pool would refuse the 101st; on one server a pipeline's finishes go as ``FINISH_MANY``.

Take-over looks first at a per-prefix sorted set, *the hint*: job name to the earliest lease
expiry of its running runs. On one server the scripts keep it in the same atomic step (never
later than the truth). On a cluster it lives in another hash slot, so claims ``TOUCH`` it in the
same pipeline and take-over passes ``SETTLE`` it afterwards. Correctness never rests on it: every
script decides from the job's own keys, and take-over passes also check every job they are given
once per ``sweep_ms`` (a slice per call), which also repairs the hint.

Liveness (:mod:`._heart`): each instance's heartbeat is a member of ``<prefix>instances``; the
owners its latest beat reported dead go to the claim, take-over and revive (:mod:`._revive`) scripts
as arguments, and the first take-over pass after a new death checks every job, whatever the hint.
Concurrency groups (:mod:`._groups`) read those records themselves, in the heartbeat key's slot.
"""

from __future__ import annotations

import asyncio
import logging
import math
import struct
import time
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar, Union

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from anarchon.backend import Capabilities, Claim, ClaimResult, Grant, LeaseBackend, Outcome
from anarchon.batching import Batcher
from anarchon.errors import BackendUnavailableError
from anarchon.job import Job
from anarchon.liveness import Heart
from anarchon.options import check_history_limit
from anarchon.records import read_runs
from anarchon.replication import check_min_replicas, check_replica_timeout
from anarchon.run import Run
from anarchon.urls import redact_url, url_scheme

from . import _scripts as S
from ._audit import AuditMixin
from ._backfill import BackfillMixin
from ._calls import PER_SCRIPT, Call, CallsMixin, each_reply, keep_cancellation, many_call
from ._control import ControlMixin
from ._full import Full, refused_for_memory
from ._groups import GroupsMixin
from ._guarantees import GuaranteesMixin
from ._heart import DeadOwners, RedisHeart, script_args
from ._known import KnownJobs
from ._names import Keyspace, check_prefix, run_id
from ._records import LOST, UNKNOWN, claim_result, final_record, grant_of, history_run, job_failed, mark_of, text
from ._registry import RegistryMixin
from ._replicas import ClusterReplicaWatch, ReplicaWatch
from ._revive import ReviveMixin
from ._sentinel import SCHEME as SENTINEL
from ._sentinel import connect
from ._stored import StoredMixin
from ._url import read_redis_url

__all__ = ["RedisBackend"]

log = logging.getLogger("anarchon.redis")

Client = Union["Redis", "RedisCluster"]

#: Jobs per ``PEEK_MANY`` script of a take-over sweep, and per ``MARKS`` script, on one server.
_PEEK_CHUNK = 1000


#: A claim's numbers as the claim script unpacks them (``struct.unpack('<dddddddddd', …)``).
_NUMBERS = struct.Struct("<10d")


class RedisBackend(
    GuaranteesMixin, CallsMixin, ControlMixin, RegistryMixin, StoredMixin, AuditMixin, BackfillMixin, ReviveMixin,
    GroupsMixin, LeaseBackend,
):  # fmt: skip
    """Lease backend on Redis >= 6.2, Redis Cluster or Sentinel (``redis://``, ``rediss://``, ``redis+sentinel://``).

    ``url`` is used only when no ``client`` is given; a passed-in client
    (``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``) stays
    the caller's and is never closed. Cluster mode is on when ``cluster=True``,
    when the URL carries ``?cluster=true``, or when the client is a
    ``RedisCluster``. Every key starts with ``prefix``; instances that should
    share jobs use the same prefix.

    The URL's query may set ``prefix``, ``cluster``, ``sweep_ms``,
    ``connect_timeout_ms``, ``min_replicas`` and ``replica_timeout_ms`` too
    (``redis://cache:6379/0?prefix=billing:&min_replicas=1``); an
    argument left at its default gives way to the URL, one that contradicts
    it is refused. Other keys must be ones redis-py reads, or are refused.
    """

    name: ClassVar[str] = "redis"
    url_schemes: ClassVar[tuple[str, ...]] = ("redis", "rediss", "redis+sentinel")
    capabilities: ClassVar[Capabilities] = Capabilities(
        lease=True,
        history_ttl=True,
        server_clock=True,
        multi_process=True,
        liveness=True,
        backfill=True,
        revive=True,
        pause=True,
        trigger=True,
        registry=True,
        schedules=True,
        schedule_notify=True,
        guarantees=True,
        audit=True,
        attempts=True,
        decided_notify=True,
        control_notify=True,
        groups=True,
        group_notify=True,
    )

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        client: Client | None = None,
        prefix: str = "cron:",
        *,
        cluster: bool | None = None,
        sweep_ms: int = 60_000,
        connect_timeout_ms: int = 5_000,
        min_replicas: int | str = "auto",
        replica_timeout_ms: int = 100,
    ) -> None:
        found = read_redis_url(url)
        prefix = found.pick("prefix", prefix, "cron:")
        cluster = found.pick("cluster", cluster, None)
        sweep_ms = found.pick("sweep_ms", sweep_ms, 60_000)
        connect_timeout_ms = found.pick("connect_timeout_ms", connect_timeout_ms, 5_000)
        min_replicas = found.pick("min_replicas", min_replicas, "auto")
        replica_timeout_ms = found.pick("replica_timeout_ms", replica_timeout_ms, 100)
        self._keys = Keyspace(check_prefix(prefix))
        self._known = KnownJobs()
        self._url = found.url
        if client is not None and not isinstance(client, (Redis, RedisCluster)):
            raise TypeError(
                f"client must be a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster, "
                f"not {type(client).__name__}"
            )
        client_cluster = isinstance(client, RedisCluster) if client is not None else None
        if cluster is None:
            cluster = bool(client_cluster)
        elif client_cluster is not None and cluster != client_cluster:
            raise ValueError(
                f"cluster={cluster} contradicts the client passed in ({type(client).__name__}); "
                "leave cluster unset to follow the client"
            )
        if cluster and url_scheme(self._url) == SENTINEL and client is None:
            raise ValueError("cluster=True with a redis+sentinel:// URL: Sentinel watches one primary, not a cluster")
        for option, value in (("sweep_ms", sweep_ms), ("connect_timeout_ms", connect_timeout_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{option}={value!r} must be a positive integer (milliseconds)")
        self.prefix = prefix
        self.cluster = cluster
        self.min_replicas = check_min_replicas(min_replicas)  # None: "auto" (_replicas.py)
        self._replica_watch = ClusterReplicaWatch() if self.cluster else ReplicaWatch()
        self.replica_timeout_ms = check_replica_timeout(replica_timeout_ms)
        self.sweep_ms = sweep_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._client: Client | None = client
        self._owns_client = client is None
        self._full = Full(redact_url(self._url) if client is None else "the client passed in")
        self._last_sweep: float | None = None
        self._sweep_cursor = 0
        # Four pipelines out at most: one slow reply does not hold up the next turn's calls.
        self._batch: Batcher[Call] = Batcher(self._calls_apart, in_flight=4)
        #: What this instance's heartbeat last reported dead, and the deaths a take-over pass swept for.
        self._dead = DeadOwners()
        self._swept: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def from_url(cls, url: str) -> RedisBackend:
        """``redis://host:6379/0?prefix=billing:``: the query may set ``prefix``, ``cluster``,
        ``sweep_ms`` and ``connect_timeout_ms``, and the keys redis-py reads (see :mod:`._url`)."""
        return cls(url=url)

    def __repr__(self) -> str:
        where = f"client=<{type(self._client).__name__}>" if not self._owns_client else f"url={redact_url(self._url)!r}"
        waits = f", min_replicas={self.min_replicas}" if self.min_replicas is not None else ""
        return f"RedisBackend({where}, prefix={self.prefix!r}, cluster={self.cluster}{waits})"

    # -- connection ---------------------------------------------------------

    def _redis(self) -> Client:
        if self._client is None:  # a Sentinel URL: a client that follows the primary (_sentinel.py)
            self._client = connect(self._url, self.cluster, self.connect_timeout_ms / 1000)
        return self._client

    async def start(self) -> None:
        try:
            await asyncio.wait_for(self._redis().ping(), self.connect_timeout_ms / 1000)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            raise BackendUnavailableError(
                f"cannot reach Redis at {redact_url(self._url) if self._owns_client else 'the client passed in'} "
                f"within {self.connect_timeout_ms} ms ({type(exc).__name__}: {exc}); check that the server runs "
                "and the URL, password and TLS settings are right"
            ) from exc
        if self.min_replicas is None:
            await self._replica_watch.refresh(self._redis())  # the first claims already wait if they must

    async def close(self) -> None:
        await self._batch.drain()
        await self._close_listener()
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    # -- claiming -------------------------------------------------------------

    def _claim_call(self, c: Claim, dead: tuple[str | int, ...] = ()) -> Call:
        o = c.options
        k = self._keys.job(c.job)
        numbers = _NUMBERS.pack(
            c.slot_ms,
            c.manual,
            c.catch_up,
            c.missed,
            c.now_ms,
            o.overlap == "skip",
            o.lease_ms,
            o.history_size,
            o.history_ttl_ms or 0,
            self._known.mark(c.job),
        )
        keys = [k.state, k.runs, k.order, k.live, *self._hint()]
        return S.CLAIM, keys, [numbers, c.token, c.instance, c.job, *dead]

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        if not claims:
            return []
        _, dead = self._unswept()
        calls = [self._claim_call(c, dead) for c in claims]
        if self.cluster:
            calls += [(S.TOUCH, [self._keys.hint], [c.job, c.options.lease_ms]) for c in claims]
            replies, reached = await self._calls_waited(calls, strict=0)
        elif len(calls) > 1:
            replies, reached = await self._claims_together(calls)
        else:
            replies, reached = await self._calls_waited(calls, strict=0)
        for failed in {type(r).__name__: r for r in replies[len(claims) :] if isinstance(r, Exception)}.values():
            log.warning("could not update the take-over hint (the next sweep repairs it): %s", failed)
        forgotten: list[Claim] = []
        results = [self._claim_answer(c, reply, forgotten) for c, reply in zip(claims, replies, strict=False)]
        self._known.report(forgotten, repr(self))
        await self._full.check(self._redis(), calls, replies, won=any(r.outcome is Outcome.WON for r in results))
        # A grant not known to be on min_replicas replicas may vanish in a failover: unknown, never run.
        return [r if ok or r.outcome is not Outcome.WON else UNKNOWN for r, ok in zip(results, reached, strict=False)]

    async def _claims_together(self, calls: list[Call]) -> tuple[list[Any], list[bool]]:
        """Claim scripts as ``CLAIM_MANY`` scripts of :data:`._calls.PER_SCRIPT` in one pipeline (one server).

        Each reply is the claim's own, as in a pipeline of single scripts; a
        script that failed as a whole fails each of its claims alone.
        """
        hint = self._hint()
        parts = [calls[i : i + PER_SCRIPT] for i in range(0, len(calls), PER_SCRIPT)]
        replies, reached = await self._calls_waited([many_call(S.CLAIM_MANY, p, hint) for p in parts], strict=0)
        out: list[Any] = []
        ok: list[bool] = []
        for part, reply, done in zip(parts, replies, reached, strict=True):
            out += each_reply(reply, len(part))
            ok += [done] * len(part)
        return out, ok

    def _claim_answer(self, c: Claim, reply: Any, forgotten: list[Claim]) -> ClaimResult:
        """One claim's answer; a script error on this job's keys is this job's alone: unknown, logged."""
        if refused_for_memory(reply):  # not this job's: claim() raises for the whole backend
            return UNKNOWN
        if isinstance(reply, Exception):
            job_failed(c.job, "claim", reply)
            return UNKNOWN
        if self._known.answered(c, reply):
            forgotten.append(c)
            return LOST
        if reply == 0:  # CLAIM_MANY's plain loss
            return LOST
        return claim_result(c, reply)

    async def finish(self, grant: Grant, run: Run) -> bool:
        k = self._keys.job(grant.job)
        args = [run_id(grant.slot_ms, grant.manual), grant.token, final_record(run), grant.job]
        return bool(await self._batch.call((S.FINISH, [k.runs, k.live, *self._hint()], args)))

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        if check_history_limit(limit) < 1:
            return []
        k = self._keys.job(job)

        async def fetch(n: int) -> list[Any]:
            raws: list[Any] = await self._batch.call((S.HISTORY, [k.runs, k.order], [n]))
            return raws

        return await read_runs(fetch, lambda raw: history_run(raw, job), limit)

    async def now_ms(self) -> int:
        seconds, micros = await keep_cancellation(self._redis().time())
        return int(seconds) * 1000 + int(micros) // 1000

    # -- lease tier -------------------------------------------------------------

    async def renew(self, grants: Sequence[Grant]) -> list[bool]:
        if not grants:
            return []
        calls: list[Call] = []
        for g in grants:
            k = self._keys.job(g.job)
            calls.append((S.RENEW, [k.runs, k.live, *self._hint()], [run_id(g.slot_ms, g.manual), g.token, g.job]))
        replies, reached = await self._calls_waited(calls, strict=0)
        await self._full.check(self._redis(), calls, replies, won=False)  # not a lost lease: tried again
        for g, reply in zip(grants, replies, strict=True):
            if isinstance(reply, Exception):
                job_failed(g.job, "renew", reply)
        return [not isinstance(r, Exception) and bool(r) and ok for r, ok in zip(replies, reached, strict=True)]

    async def hand_over(self, grant: Grant) -> bool:
        k = self._keys.job(grant.job)
        args = [run_id(grant.slot_ms, grant.manual), grant.token, grant.job]
        done = bool(await self._batch.call((S.HAND_OVER, [k.runs, k.live, *self._hint()], args)))
        if done and self.cluster:
            await self._batch.call((S.TOUCH, [self._keys.hint], [grant.job, 0]))
        return done

    def _unswept(self) -> tuple[frozenset[tuple[str, int]], tuple[str | int, ...]]:
        """The dead owners no take-over pass of this backend has run with yet, and their script arguments.

        Only those go to the scripts (see :mod:`._liveness`); ``_swept`` keeps
        just the pairs the latest beat still reports, so it stays small.
        """
        pairs = self._dead.snapshot()
        if not pairs:
            self._swept = frozenset()
            return pairs, ()
        self._swept &= pairs
        new = pairs - self._swept
        return new, script_args(new) if new else ()

    def _sweep_slice(self, jobs: Sequence[Job]) -> list[Job]:
        """The jobs this pass checks whatever the hint says: all of them every ``sweep_ms``, spread over calls."""
        now, n = time.monotonic(), len(jobs)
        if self._last_sweep is None:
            count = n
        else:
            count = min(n, math.ceil(n * (now - self._last_sweep) * 1000 / self.sweep_ms))
        self._last_sweep = now
        first = self._sweep_cursor % n
        self._sweep_cursor = (first + count) % n
        return [jobs[(first + i) % n] for i in range(count)]

    def _peeks(self, sweep: Sequence[Job]) -> list[Call]:
        """The sweep's look at each job's live runs: on one server one script per 1,000 jobs.

        A script per job cost the scheduler's process 13 % of a core at 100,000
        jobs (1,667 jobs a second with the default ``sweep_ms``), nearly all of
        it in the client building and parsing the commands. On a cluster the
        keys are in many slots, so each job keeps its own ``PEEK``.
        """
        if self.cluster:
            return [(S.PEEK, [self._keys.job(j.name).live], []) for j in sweep]
        prefix = self.prefix
        keys = [f"{prefix}{{{j.name}}}:live" for j in sweep]  # not _keys.job(): a sweep would evict its cache
        return [(S.PEEK_MANY, keys[i : i + _PEEK_CHUNK], []) for i in range(0, len(keys), _PEEK_CHUNK)]

    def _running(self, sweep: Sequence[Job], replies: Sequence[Any]) -> set[str]:
        """The names of the swept jobs that hold a lease, from :meth:`_peeks`' replies; failures are logged."""
        running: set[str] = set()
        if self.cluster:
            for j, count in zip(sweep, replies, strict=True):
                if isinstance(count, Exception):
                    job_failed(j.name, "take-over", count)
                elif count:
                    running.add(j.name)
            return running
        for chunk, reply in enumerate(replies):
            first = chunk * _PEEK_CHUNK
            if isinstance(reply, Exception):
                for j in sweep[first : first + _PEEK_CHUNK]:
                    job_failed(j.name, "take-over", reply)
                continue
            for position in reply:
                j = sweep[first + abs(int(position)) - 1]
                if position > 0:
                    running.add(j.name)
                else:
                    job_failed(j.name, "take-over", ResponseError(f"WRONGTYPE: {self._keys.job(j.name).live}"))
        return running

    async def take_over(self, jobs: Sequence[Job], instance: str) -> list[ClaimResult]:
        if not jobs:
            return []
        await self._full.probe(self._redis())  # the scheduler's recovery ends here: only once Redis takes writes
        sweep = self._sweep_slice(jobs)
        dead_pairs, dead = self._unswept()
        if dead_pairs:
            # A new death: the hint knows lease expiries, not owners, so every job is looked at once.
            sweep = list(jobs)
        replies = await self._calls([(S.DUE, [self._keys.hint], []), *self._peeks(sweep)], strict=0)
        hint = replies[0]
        if isinstance(hint, Exception):
            # Someone wrote the shared hint key as another type: no job is stopped, every one is looked at.
            log.error(
                "the take-over hint %s cannot be read (%s); delete that key: until then every job is checked "
                "on every pass",
                self._keys.hint,
                hint,
            )
            hint, sweep = [], list(jobs)
            replies = [hint, *await self._calls(self._peeks(sweep), strict=0)]
        due = {text(hint[i]): text(hint[i + 1]) for i in range(0, len(hint), 2)}
        running = self._running(sweep, replies[1:])
        if not due and not running:
            self._swept |= dead_pairs  # no job holds a lease: a dead owner has nothing left to take
            return []  # the common pass: no look at every job given
        candidates = [j for j in jobs if j.name in due or j.name in running]
        if not candidates:
            self._swept |= dead_pairs
            return []
        nonce = uuid.uuid4().hex
        calls: list[Call] = []
        for job in candidates:
            k = self._keys.job(job.name)
            args = [instance, job.options.max_attempts, job.options.lease_ms, nonce, job.name, *dead]
            calls.append((S.TAKE_OVER, [k.state, k.runs, k.live, *self._hint()], args))
        answers, answered = await self._calls_waited(calls, strict=0)
        await self._full.check(
            self._redis(), calls, answers, won=any(len(a) > 1 for a in answers if isinstance(a, list))
        )
        self._swept |= dead_pairs
        results, reached = [], []
        for job, answer, ok in zip(list(candidates), answers, answered, strict=True):
            if isinstance(answer, Exception):
                if not refused_for_memory(answer):
                    job_failed(job.name, "take-over", answer)
                candidates.remove(job)
            else:
                results.append(answer)
                reached.append(ok)
        if self.cluster:
            settles: list[Call] = []
            for job, reply in zip(candidates, results, strict=True):
                nxt = text(reply[0]) if reply[0] is not None else ""
                settles.append((S.SETTLE, [self._keys.hint], [job.name, due.get(job.name, ""), nxt]))
            try:
                await self._calls(settles)
            except RedisError as exc:  # the runs are ours already: run them, repair the hint later
                log.warning("could not update the take-over hint (the next sweep repairs it): %s", exc)
        return [
            ClaimResult(Outcome.WON, grant_of(raw)) if ok else UNKNOWN
            for reply, ok in zip(results, reached, strict=True)
            for raw in reply[1:]
        ]

    def heart(self) -> Heart | None:
        """This instance's heartbeat on a client of its own; ``None`` with a client passed in.

        The heartbeat runs in another thread and event loop, where the
        backend's client cannot be used, and a passed-in client's settings
        cannot be copied faithfully: such an instance keeps no record, so its
        runs wait for their lease if it dies. Pass ``url=`` for liveness.
        """
        if not self._owns_client:
            log.info(
                "%r: no heartbeat with a client passed in (pass url= instead): if this instance dies, its runs "
                "are taken over when their lease expires",
                self,
            )
            return None
        return RedisHeart(self._url, self.cluster, self._keys.instances, self.connect_timeout_ms / 1000, self._dead)

    async def marks(self, jobs: Sequence[Job]) -> dict[str, int | None]:
        if not jobs:
            return {}
        if self.cluster:  # keys of many slots: one HGET each, in one pipeline
            pipe = self._redis().pipeline(transaction=False)
            for job in jobs:
                pipe.hget(self._keys.job(job.name).state, "mark")
            values = await pipe.execute(raise_on_error=False)
        else:  # a script per chunk of jobs: one reply to parse, not one per job
            keys, n = [self._keys.job(job.name).state for job in jobs], _PEEK_CHUNK
            values = [v for i in range(0, len(keys), n) for v in await self._call(S.MARKS, keys[i : i + n], [])]
        return {job.name: mark_of(job.name, v) for job, v in zip(jobs, values, strict=True)}
