"""Helpers for tests of anarchon and of its backends, public so every test suite uses the same ones.

* :func:`eventually` — await a condition that time will make true (a lease
  expiring, a run recorded), with a deadline and a message naming it;
* :func:`make_job` — a job built exactly as ``Scheduler.add()`` builds it;
* :func:`make_claim` — a claim of one slot, as the scheduler would send it;
* :func:`free_port` — a loopback port for a private server;
* :func:`registry_entry` — the head and job texts of a fleet registry entry,
  as an instance would write them (``backend.register(instance, *entry)``);
  :func:`register_at` plants one in the backend at a URL, from sync code.

The core's tests, every backend's, the conformance suite, the fault suite and
the benchmarks import these instead of keeping copies of their own.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from anarchon.backend import Backend
from anarchon.claims import Claim
from anarchon.fleet import InstanceInfo, JobDefinition, encode_jobs, jobs_fingerprint
from anarchon.groups import Place
from anarchon.job import Job

from ._jobs import EVERY_SECOND, finished_run, make_job, now_ms, unique_name
from ._jobs import now_ms as clock_now_ms  # make_claim's parameter of that name shadows it
from ._ports import free_port
from ._proxy import FaultProxy, Link

__all__ = [
    "EVERY_SECOND",
    "FaultProxy",
    "Link",
    "eventually",
    "finished_run",
    "free_port",
    "make_claim",
    "make_job",
    "now_ms",
    "random_places",
    "register_at",
    "registry_entry",
    "unique_name",
]


async def eventually(
    check: Callable[[], Any],
    timeout_s: float = 10.0,
    *,
    what: str = "the condition",
    interval_s: float = 0.02,
) -> Any:
    """Call ``check`` (plain or ``async``) until it returns something truthy, and return that.

    For what time makes true (a lease expiring, a record arriving): a check
    that is still false after ``timeout_s`` seconds fails the test with an
    :class:`AssertionError` naming ``what``. Where the code under test can set
    an event, await the event instead.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still not true after {timeout_s:.1f} s")
        await asyncio.sleep(interval_s)


def make_claim(
    job: Job,
    slot_ms: int,
    instance: str = "i1",
    *,
    token: str | None = None,
    now_ms: int | None = None,
    **fields: Any,
) -> Claim:
    """A claim of ``job``'s slot by ``instance``, with a fresh token and the clock now, as the batcher makes one.

    ``fields`` sets the rest of :class:`~anarchon.claims.Claim` (``manual``,
    ``catch_up``, ``missed``).
    """
    return Claim(
        job=job,  # type: ignore[arg-type]  # a Job is split into name and spec (Claim.__post_init__)
        slot_ms=slot_ms,
        instance=instance,
        token=token or uuid.uuid4().hex,
        now_ms=now_ms if now_ms is not None else clock_now_ms(),
        **fields,
    )


def registry_entry(
    backend: Backend,
    instance: str,
    crons: dict[str, str],
    *,
    started_ms: int = 1_700_000_000_000,
    version: str = "1.0",
    host: str = "host-a",
    pid: int = 4242,
    tasks: tuple[str, ...] = (),
) -> tuple[str, str]:
    """``(head, jobs)`` of an instance defining ``crons`` (name → cron, ``jitter_ms=0``) and having ``tasks``."""
    definitions = [JobDefinition.of(make_job(backend, name, cron, jitter_ms=0)) for name, cron in crons.items()]
    info = InstanceInfo(
        instance, host, pid, version, started_ms, len(definitions), jobs_fingerprint(definitions), tasks=tasks
    )
    return info.head(), encode_jobs(definitions)


def register_at(url: str, instance: str, crons: dict[str, str], **entry: Any) -> None:
    """Plant an instance's registry entry in the backend at ``url`` from sync code (a CLI or web test).

    ``entry`` goes to :func:`registry_entry` (``version``, ``started_ms``, ``host``, ``pid``, ``tasks``).
    """
    from anarchon.plugins import PluginManager

    async def plant() -> None:
        backend = PluginManager().backend_from_url(url)
        await backend.start()
        try:
            await backend.register(instance, *registry_entry(backend, instance, crons, **entry))
        finally:
            await backend.close()

    asyncio.run(plant())


def random_places(
    rng: random.Random, held: list[Place], instance: str, *, groups: Sequence[str], jobs: Sequence[str], slot_ms: int
) -> tuple[list[Place], list[Place]]:
    """One random ``places()`` call of ``instance`` for a differential test against the memory reference.

    Leaves of up to two places asked before (one in five with a stale token), and up to four asks: a run
    asking again, or taken over (a new token, which may hold a space), or a new run of a slot near
    ``slot_ms``. The asks are added to ``held``.
    """
    leave = [
        p if rng.random() < 0.8 else Place(p.group, p.job, p.slot_ms, p.manual, "stale", p.instance)
        for p in rng.sample(held, min(len(held), rng.randint(0, 2)))
    ]
    take = []
    for _ in range(rng.randint(0 if leave else 1, 4)):
        mine = [p for p in held if p.instance == instance]
        if mine and rng.random() < 0.4:
            p = rng.choice(mine)
            token = p.token if rng.random() < 0.7 else f"{p.token} +"
            take.append(Place(p.group, p.job, p.slot_ms, p.manual, token, instance))
        else:
            slot = slot_ms + rng.randrange(-5, 5) * 1000
            job, manual = rng.choice(jobs), rng.random() < 0.2
            take.append(Place(rng.choice(groups), job, slot, manual, f"{instance}-{job}-{slot}", instance))
    held += take
    return leave, take
