"""The fleet registry: what each live instance is and which job definitions it holds.

Every instance of a backend with ``capabilities.registry`` writes one entry
to the store: a small *head* (id, host, pid, version, start time, job count
and a fingerprint of all its definitions) and its *jobs*, each job's whole
definition (cron, time zone, every resolved option) with a fingerprint. It
writes them at start and when a job is added or removed, removes them at a
clean stop, and a dead instance's entry stops counting with its liveness
(the heartbeat on lease backends, a TTL on others). Readers take the heads
of live instances every poll, and read an instance's jobs only when its
fingerprint of all definitions changed, so a quiet fleet costs one read of
the heads per instance per poll.

With it, the views need only the backend (``anarchon jobs|fleet|web
--backend URL``), and definitions that differ between live instances (a
rolling deploy that changes a schedule) are caught: :mod:`anarchon._fleetwatch`
warns once per change and lets one definition run, by the scheduler's
``drift`` policy.

Public: backends store the two texts as they are; :func:`read_fleet` reads
them back for views.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import logging
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .errortext import clean_text

if TYPE_CHECKING:
    from .backend import Backend
    from .job import Job
    from .options import JobOptions

__all__ = [
    "DRIFT_POLICIES",
    "REGISTRY_KEEP_BEATING_MS",
    "REGISTRY_POLL_MS",
    "REGISTRY_TTL_MS",
    "DriftPolicy",
    "Fleet",
    "FleetJob",
    "FleetReader",
    "InstanceInfo",
    "JobDefinition",
    "read_fleet",
    "winner",
]

log = logging.getLogger("anarchon.fleet")

#: How often each instance reads the heads of the fleet (and refreshes its own where that needs a write).
REGISTRY_POLL_MS = 1000
#: Where an entry lives by a TTL (no heartbeat), how long it outlives its last refresh: five polls.
REGISTRY_TTL_MS = 5000
#: Where it lives by its instance's heartbeat, how often it is refreshed all the same: inside
#: :data:`REGISTRY_TTL_MS` even with the poll's jitter, so an instance of a release that still reads
#: an entry as live only while it has not expired keeps seeing this one during a rolling deploy.
REGISTRY_KEEP_BEATING_MS = 3000
DriftPolicy = Literal["newest", "oldest", "each"]
DRIFT_POLICIES: tuple[DriftPolicy, ...] = ("newest", "oldest", "each")
#: Format of the stored texts; a reader skips entries of another format.
FORMAT = 1
#: A job-definitions text longer than this is stored compressed.
COMPRESS_OVER = 65_536
#: The most a compressed text may inflate to (a foreign value must not exhaust memory).
INFLATED_LIMIT = 64 * 1024 * 1024

_reported_lock = threading.Lock()
_reported: set[str] = set()


def _report(instance: str, what: str, raw: object, reason: str) -> None:
    """A registry entry this version cannot read: logged once per instance, then skipped."""
    with _reported_lock:
        first = instance not in _reported
        _reported.add(instance)
    (log.warning if first else log.debug)(
        "fleet registry: skipped the %s of instance %r, which this version cannot read (%s): %s; "
        "it was not written by anarchon, or by an incompatible version",
        what,
        clean_text(instance, 100),
        reason,
        clean_text(repr(raw), 120),
    )


def _digest(data: Any) -> str:
    return hashlib.sha256(_canonical(data).encode()).hexdigest()[:16]


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def _options_of(options: JobOptions) -> tuple[Mapping[str, Any], str]:
    """A job's options as stored, and their canonical text: jobs of equal options share one (10,000 jobs
    converted one by one took 0.3 s of a start)."""
    from .options import OMITTED_AT_DEFAULT

    absent = object()
    data = {k: v for k, v in dataclasses.asdict(options).items() if OMITTED_AT_DEFAULT.get(k, absent) != v}
    return data, _canonical(data)


def _fingerprint(cron: str, canonical_options: str) -> str:
    return hashlib.sha256(f"{cron}\n{canonical_options}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JobDefinition:
    """One job as one instance defines it: everything that decides its slots and runs."""

    name: str
    cron: str
    timezone: str
    options: Mapping[str, Any]
    fingerprint: str
    #: The options' canonical text, kept to store them without encoding them again.
    canonical: str = field(default="", repr=False, compare=False)

    @classmethod
    def of(cls, job: Job) -> JobDefinition:
        options, canonical = _options_of(job.options)
        # One crontab line, however it was spaced: a tab-separated paste is not a drift.
        return cls.make(job.name, " ".join(job.cron.split()), options, canonical)

    @classmethod
    def make(cls, name: str, cron: str, options: Mapping[str, Any], canonical: str | None = None) -> JobDefinition:
        """A definition with its fingerprint: the cron and every option, as one canonical text."""
        text = canonical if canonical is not None else _canonical(options)
        return cls(name, cron, str(options.get("timezone", "UTC")), options, _fingerprint(cron, text), text)

    def differences(self, other: JobDefinition) -> dict[str, tuple[Any, Any]]:
        """The fields that differ, each as (this value, the other's): ``cron`` and option names."""
        diff: dict[str, tuple[Any, Any]] = {}
        if self.cron != other.cron:
            diff["cron"] = (self.cron, other.cron)
        for key in sorted(set(self.options) | set(other.options)):
            if self.options.get(key) != other.options.get(key):
                diff[key] = (self.options.get(key), other.options.get(key))
        return diff


@dataclass(frozen=True)
class InstanceInfo:
    """A live instance as its registry head says, with when the store last heard from it."""

    instance: str
    host: str
    pid: int
    version: str
    started_ms: int
    jobs: int
    jobs_fingerprint: str
    #: Its scheduler's drift policy (which definition it lets run when live instances differ).
    drift: str = "newest"
    #: The tasks it registered (``Scheduler.task``): the stored schedules it can run.
    tasks: tuple[str, ...] = ()
    #: When the store last heard from it (its last heartbeat or refresh, epoch ms); ``None`` if unknown.
    seen_ms: int | None = None

    def head(self) -> str:
        data = dataclasses.asdict(self)
        data.pop("seen_ms")
        return json.dumps({"format": FORMAT, **data}, sort_keys=True)

    @classmethod
    def parse(cls, instance: str, raw: str | bytes, seen_ms: int | None) -> InstanceInfo | None:
        """The head as stored, or ``None`` (reported once) when it cannot be read."""
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a registry head of format {FORMAT}")
            info = cls(
                instance,
                str(data["host"]),
                int(data["pid"]),
                str(data["version"]),
                int(data["started_ms"]),
                int(data["jobs"]),
                str(data["jobs_fingerprint"]),
                str(data.get("drift", "newest")),
                tuple(str(t) for t in data.get("tasks", ())),
                seen_ms=seen_ms,
            )
        except (ValueError, TypeError, KeyError) as exc:
            _report(instance, "head", raw, str(exc))
            return None
        if info.instance != data.get("instance"):
            _report(instance, "head", raw, "it names another instance")
            return None
        return info


def encode_jobs(definitions: Iterable[JobDefinition]) -> str:
    """One instance's definitions as one text: each distinct set of options once, each job as [cron, set].

    10,000 jobs of one options set took 4.6 MB as whole definitions and take
    about 350 kB so; a text over :data:`COMPRESS_OVER` is zlib-compressed and
    base64-encoded behind ``z:`` (a key-value store's values have a size
    limit, 1 MB by default on one of the backends).
    """
    sets: dict[str, int] = {}
    listed: list[Mapping[str, Any]] = []
    jobs: dict[str, list[Any]] = {}
    for d in definitions:
        key = d.canonical or _canonical(d.options)
        if key not in sets:
            sets[key] = len(listed)
            listed.append(dict(d.options))
        jobs[d.name] = [d.cron, sets[key]]
    text = _canonical({"format": FORMAT, "options": listed, "jobs": jobs})
    if len(text) > COMPRESS_OVER:
        text = "z:" + base64.b64encode(zlib.compress(text.encode(), 6)).decode("ascii")
    return text


def _inflate(raw: str | bytes) -> str | bytes:
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not raw.startswith("z:"):
        return raw
    inflater = zlib.decompressobj()
    out = inflater.decompress(base64.b64decode(raw[2:], validate=True), INFLATED_LIMIT)
    if inflater.unconsumed_tail:
        raise ValueError(f"more than {INFLATED_LIMIT} bytes once inflated")
    return out


def decode_jobs(instance: str, raw: str | bytes) -> dict[str, JobDefinition] | None:
    """An instance's definitions; a definition that cannot be read is skipped, a whole text too."""
    try:
        data = json.loads(_inflate(raw))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a registry job list of format {FORMAT}")
        listed, jobs = data.get("options"), data.get("jobs")
        if not isinstance(listed, list) or not isinstance(jobs, dict):
            raise ValueError("a job list needs 'options' (a list) and 'jobs' (an object)")
    except (ValueError, TypeError, zlib.error) as exc:
        _report(instance, "jobs", raw, str(exc))
        return None
    canonical = [_canonical(o) if isinstance(o, dict) else None for o in listed]
    out: dict[str, JobDefinition] = {}
    for name, item in jobs.items():
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
            and 0 <= item[1] < len(listed)
            and canonical[item[1]] is not None
        )
        if not ok:
            _report(instance, f"job {name!r}", item, "not [cron, options index]")
            continue
        out[str(name)] = JobDefinition.make(str(name), item[0], listed[item[1]], canonical[item[1]])
    return out


def jobs_fingerprint(definitions: Iterable[JobDefinition]) -> str:
    return _digest(sorted((d.name, d.fingerprint) for d in definitions))


@dataclass(frozen=True)
class FleetJob:
    """One job across the live fleet: each distinct definition with the instances that hold it."""

    name: str
    #: Fingerprint → (definition, ids of the live instances holding it), oldest holder first.
    definitions: Mapping[str, tuple[JobDefinition, tuple[str, ...]]]

    @property
    def instances(self) -> tuple[str, ...]:
        return tuple(sorted(i for _, holders in self.definitions.values() for i in holders))

    @property
    def drift(self) -> bool:
        """Live instances hold more than one definition of it."""
        return len(self.definitions) > 1

    @property
    def definition(self) -> JobDefinition:
        """One definition (the first by fingerprint): the only one unless :attr:`drift`."""
        return self.definitions[min(self.definitions)][0]

    def differing_fields(self) -> list[str]:
        """The fields in which its definitions differ (``cron``, option names)."""
        defs = [d for d, _ in self.definitions.values()]
        return sorted({key for d in defs[1:] for key in defs[0].differences(d)})


def winner(job: FleetJob, started: Mapping[str, int], policy: DriftPolicy) -> str | None:
    """The fingerprint that runs under ``policy`` (``None`` with ``"each"``: every definition runs).

    ``"newest"``: the definition whose earliest live holder started last, so
    the first pod of a new release switches the job over, and a rollback's
    first pod switches it back. ``"oldest"``: the one whose earliest live
    holder started first. Ties are broken by fingerprint, the same way on
    every instance.
    """
    if policy == "each" or not job.definitions:
        return None

    def rank(fp: str) -> tuple[int, str]:
        return min(started.get(i, 0) for i in job.definitions[fp][1]), fp

    return max(job.definitions, key=rank) if policy == "newest" else min(job.definitions, key=rank)


@dataclass(frozen=True)
class Fleet:
    """The live instances and the definitions each holds, read from the backend."""

    instances: tuple[InstanceInfo, ...] = ()
    #: Instance id → job name → its definition there.
    definitions: Mapping[str, Mapping[str, JobDefinition]] = field(default_factory=dict)
    #: Names of the jobs that are stored schedules (views only: held by the live instances with their task).
    stored: frozenset[str] = frozenset()

    @property
    def started(self) -> dict[str, int]:
        return {i.instance: i.started_ms for i in self.instances}

    def jobs(self) -> list[FleetJob]:
        """Every job some live instance defines, by name."""
        order = {i.instance: (i.started_ms, i.instance) for i in self.instances}
        by_job: dict[str, dict[str, tuple[JobDefinition, list[str]]]] = {}
        for instance in sorted(self.definitions, key=lambda i: order.get(i, (0, i))):
            for name, definition in self.definitions[instance].items():
                held = by_job.setdefault(name, {}).setdefault(definition.fingerprint, (definition, []))
                held[1].append(instance)
        return [
            FleetJob(name, {fp: (d, tuple(h)) for fp, (d, h) in sorted(defs.items())})
            for name, defs in sorted(by_job.items())
        ]

    def job(self, name: str) -> FleetJob | None:
        return next((j for j in self.jobs() if j.name == name), None)

    def running(self, job: FleetJob) -> JobDefinition:
        """The definition that runs: the only one, or the one its holders' drift policy picks.

        Instances that disagree on the policy (or use ``"each"``) are shown by ``"newest"``, the default.
        """
        policies = {i.drift for i in self.instances if i.instance in job.instances}
        policy: DriftPolicy = "oldest" if policies == {"oldest"} else "newest"
        return job.definitions[winner(job, self.started, policy) or min(job.definitions)][0]


async def read_heads(backend: Backend) -> list[InstanceInfo]:
    """The heads of the live instances, readable ones only."""
    heads = await backend.registered()
    return [info for instance, raw, seen in heads if (info := InstanceInfo.parse(instance, raw, seen)) is not None]


class FleetReader:
    """Reads the live fleet again and again, each instance's definitions only when its fingerprint changed.

    A quiet fleet then costs one read of the heads; the scheduler's poll and
    the dashboard's pages each keep one.
    """

    def __init__(self) -> None:
        #: Instance -> (the jobs fingerprint its definitions were read at, the definitions).
        self._seen: dict[str, tuple[str, dict[str, JobDefinition]]] = {}
        #: Stored schedules as definitions, and the schedule revision they were read at.
        self._stored: dict[str, tuple[str, JobDefinition]] = {}
        self._stored_revision = 0

    async def _read_stored(self, backend: Backend) -> dict[str, tuple[str, JobDefinition]]:
        """Stored schedules (task, definition), read again only as far as they changed."""
        from .schedules import StoredSchedule  # stored schedules import the job machinery; the registry need not

        revision = await backend.schedules_revision()
        if revision != self._stored_revision:
            rows = await backend.schedules_since(self._stored_revision)
            if self._stored_revision == 0:
                self._stored.clear()
            for name, record, rev in rows:
                self._stored.pop(name, None)
                if record is None:
                    continue
                try:
                    s = StoredSchedule.parse(name, record, rev)
                except (ValueError, TypeError, KeyError):
                    continue  # the instances report it; a view leaves it out
                self._stored[name] = (s.task, JobDefinition.make(name, " ".join(s.cron.split()), dict(s.options)))
            self._stored_revision = max([revision, *(rev for _, _, rev in rows)])
        return self._stored

    async def read(
        self, backend: Backend, heads: Sequence[InstanceInfo] | None = None, *, but: str = "", stored: bool = False
    ) -> Fleet:
        """The fleet of ``heads`` (read from ``backend`` if not given); the definitions of ``but`` are not read.

        ``stored``: add the stored schedules (backends with ``schedules``), each held by the live
        instances that have its task, for views; the scheduler's own drift check leaves them out.
        """
        if heads is None:
            heads = await read_heads(backend)
        wanted = {h.instance: h.jobs_fingerprint for h in heads if h.instance != but}
        stale = [i for i, fp in wanted.items() if self._seen.get(i, ("",))[0] != fp]
        if stale:
            for instance, text in (await backend.registered_jobs(stale)).items():
                read = decode_jobs(instance, text)
                if read is not None and instance in wanted:
                    self._seen[instance] = (wanted[instance], read)
        for gone in set(self._seen) - set(wanted):
            del self._seen[gone]
        definitions = {i: dict(d) for i, (_, d) in self._seen.items()}
        names: frozenset[str] = frozenset()
        if stored and backend.capabilities.schedules:
            schedules = await self._read_stored(backend)
            names = frozenset(schedules)
            for head in heads:
                held = definitions.setdefault(head.instance, {})
                for name, (task, definition) in schedules.items():
                    if task in head.tasks and name not in held:
                        held[name] = definition
        return Fleet(tuple(sorted(heads, key=lambda i: (i.started_ms, i.instance))), definitions, names)


async def read_fleet(backend: Backend) -> Fleet:
    """The live fleet from a started backend with ``capabilities.registry``, for views (stored schedules too)."""
    return await FleetReader().read(backend, stored=True)


def describe(definitions: Sequence[tuple[JobDefinition, Sequence[InstanceInfo]]], fields_: Sequence[str]) -> str:
    """``cron '*/5 * * * * *' on i-7f (v1.4.2), '* * * * * *' on i-9c (v1.5.0)``: the fields that differ."""
    parts = []
    for definition, holders in definitions:
        values = " ".join(
            f"{key}={definition.cron if key == 'cron' else definition.options.get(key)!r}" for key in fields_
        )
        who = ", ".join(f"{h.instance} ({h.version or 'no version'})" for h in holders)
        parts.append(f"{values} on {who}")
    return "; ".join(parts)
