"""What a conformance test holds: the backend objects it made, and ways to drive them.

The suite never talks to a store directly; it drives backend objects the way
a scheduler would, several of them at once, each one an instance.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from anarchon.backend import Backend, Capabilities, Claim, ClaimResult, Grant, LeaseBackend
from anarchon.job import Job
from anarchon.liveness import Beat, Heart
from anarchon.run import Run, RunStatus

from ._jobs import finished_run, make_job, now_ms, unique_name
from .testing import eventually

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["BackendFactory", "Conformance", "Instance"]

#: What ``backend_factory`` returns: each call is a fresh, unstarted backend
#: object on the test's one store and namespace.
BackendFactory = Callable[[], Backend]


class Instance:
    """One backend object, started: one instance of an application."""

    def __init__(self, backend: Backend, instance_id: str) -> None:
        self.backend = backend
        self.id = instance_id
        self.closed = False
        self._prepared: set[str] = set()
        self._heart: Heart | None = None

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """``Backend.prepare`` for jobs this instance has not seen, as ``start()``/``add()`` do."""
        new = [job for job in jobs if job.name not in self._prepared]
        if new:
            await self.backend.prepare(new)
            self._prepared.update(job.name for job in new)

    def __repr__(self) -> str:
        return f"Instance({self.id!r}, {self.backend!r})"

    def make_claim(
        self,
        job: Job,
        slot_ms: int,
        *,
        token: str | None = None,
        manual: bool = False,
        catch_up: bool = False,
        missed: int = 0,
        clock_ms: int | None = None,
    ) -> Claim:
        return Claim(
            job=job.name,
            spec=job,
            slot_ms=slot_ms,
            instance=self.id,
            token=token or uuid.uuid4().hex,
            now_ms=clock_ms if clock_ms is not None else now_ms(),
            manual=manual,
            catch_up=catch_up,
            missed=missed,
        )

    async def claim_all(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """One ``claim()`` call; checks that the answers line up with the claims."""
        await self.prepare(list({c.job: c.spec for c in claims}.values()))
        results = list(await self.backend.claim(claims))
        assert len(results) == len(claims), f"claim() got {len(claims)} claims and answered {len(results)}"
        for claim, result in zip(claims, results, strict=True):
            if result.grant is not None:
                g = result.grant
                assert (g.job, g.slot_ms, g.manual) == (claim.job, claim.slot_ms, claim.manual), (
                    f"answer for claim {claim.job}@{claim.slot_ms} carries a grant for {g.job}@{g.slot_ms}: "
                    "claim() must answer in the order of the claims"
                )
        return results

    async def claim(self, job: Job, slot_ms: int, **kwargs: Any) -> ClaimResult:
        (result,) = await self.claim_all([self.make_claim(job, slot_ms, **kwargs)])
        return result

    async def finish(self, grant: Grant, status: RunStatus = RunStatus.SUCCEEDED, *, error: str | None = None) -> bool:
        return await self.backend.finish(grant, finished_run(grant, status, error=error))

    @property
    def leases(self) -> LeaseBackend:
        """The backend as the lease tier it must be for a lease test."""
        assert isinstance(self.backend, LeaseBackend), f"{self.backend!r} is not a LeaseBackend"
        return self.backend

    async def renew(self, grant: Grant) -> bool:
        answers = list(await self.leases.renew([grant]))
        assert len(answers) == 1, f"renew() got one grant and answered {answers!r}"
        return answers[0]

    async def take_over(self, job: Job) -> list[ClaimResult]:
        await self.prepare([job])
        return list(await self.leases.take_over([job], self.id))

    async def beat(self, ttl_ms: int) -> Beat:
        """One heartbeat of this instance (liveness), on a heart opened on first use."""
        if self._heart is None:
            heart = self.leases.heart()
            assert heart is not None, f"{self.backend!r} declares liveness but heart() returned None"
            await heart.open()
            self._heart = heart
        return await self._heart.beat(self.id, ttl_ms)

    async def leave(self) -> None:
        assert self._heart is not None, "leave() before any beat()"
        await self._heart.leave(self.id)

    async def stop_beating(self) -> None:
        """Close the heart without leaving: the record expires by itself, as after ``kill -9``."""
        heart, self._heart = self._heart, None
        if heart is not None:
            await heart.close()

    async def die(self) -> None:
        """Stop as a crashed process would: no finish, no hand-over, connection gone."""
        if not self.closed:
            self.closed = True
            await self.stop_beating()
            await self.backend.close()


class Conformance:
    """The backends one test made from ``backend_factory``, and what they declare.

    The first object the factory returns is read for its class attributes and
    then becomes the first instance; every started object is closed at
    teardown.
    """

    def __init__(self, factory: BackendFactory) -> None:
        self._factory = factory
        self._spare: Backend | None = self._make()
        self.backend_class: type[Backend] = type(self._spare)
        self.name: str = self.backend_class.name
        caps = getattr(self.backend_class, "capabilities", None)
        if not isinstance(caps, Capabilities):
            raise TypeError(
                f"{self.backend_class.__qualname__}.capabilities must be an anarchon.backend.Capabilities, "
                f"not {caps!r}; declare it as a class attribute"
            )
        self.capabilities: Capabilities = caps
        self.instances_made: list[Instance] = []
        self.schedulers_made: list[Scheduler] = []

    def describe(self) -> str:
        """One line for reports: name, tier and declared capabilities."""
        flags = ", ".join(self.capabilities.describe()) or "no optional capabilities"
        where = f"{self.backend_class.__module__}.{self.backend_class.__qualname__}"
        return f"backend {self.name!r} ({where}), {self.capabilities.kind} tier: {flags}"

    @property
    def lease(self) -> bool:
        return self.capabilities.lease

    def _make(self) -> Backend:
        backend = self._factory()
        if not isinstance(backend, Backend):
            raise TypeError(
                f"backend_factory returned {backend!r}; it must return a new anarchon.backend.Backend "
                "object on each call (for example: return lambda: MyBackend(store))"
            )
        return backend

    async def instance(self) -> Instance:
        """A new instance: a fresh backend object from the factory, started."""
        backend, self._spare = self._spare, None
        if backend is None:
            backend = self._make()
        if any(i.backend is backend for i in self.instances_made):
            raise AssertionError(
                "backend_factory returned the same object twice; each call must return a fresh backend "
                "object (one per instance) sharing the test's store"
            )
        if type(backend) is not self.backend_class:
            raise AssertionError(
                f"backend_factory returned a {type(backend).__name__}, then a {self.backend_class.__name__}"
            )
        instance = Instance(backend, f"inst{len(self.instances_made)}-{secrets.token_hex(2)}")
        self.instances_made.append(instance)
        await backend.start()
        return instance

    async def instances(self, count: int) -> list[Instance]:
        """Several instances, all started at once, as a fleet's processes start after a deploy."""
        return list(await asyncio.gather(*(self.instance() for _ in range(count))))

    async def scheduler(self, *, start: bool = True, **options: Any) -> Scheduler:
        """A started :class:`~anarchon.Scheduler` on a fresh backend object: one more instance.

        ``start=False`` leaves starting it to the test, for jobs that must be
        there at start (catch-up runs once, at start).

        The scheduler owns that backend object (it starts and closes it); the
        suite stops the scheduler at teardown. ``options`` go to ``Scheduler()``
        (``version``, ``drift``, …).
        """
        from anarchon.scheduler import Scheduler  # the claim-level parts need no scheduler

        options.setdefault("instance_id", f"sched{len(self.schedulers_made)}-{secrets.token_hex(2)}")
        scheduler = Scheduler(self._make(), **options)
        self.schedulers_made.append(scheduler)
        if start:
            await scheduler.start()
        return scheduler

    def job(self, prefix: str = "cf", **options: Any) -> Job:
        """A job with a name unique to this test, checked as ``Scheduler.add()`` checks it."""
        return make_job(self._probe(), unique_name(prefix), **options)

    def make_job(self, name: str, **options: Any) -> Job:
        return make_job(self._probe(), name, **options)

    def _probe(self) -> Backend:
        """A backend object to resolve options with (no I/O needed for that)."""
        if self._spare is not None:
            return self._spare
        return self.instances_made[0].backend

    @staticmethod
    def slots(count: int, *, start_ms: int | None = None, step_ms: int = 1000) -> list[int]:
        """Consecutive slots of an every-second job, from the current second on."""
        first = start_ms if start_ms is not None else now_ms() // 1000 * 1000
        return [first + i * step_ms for i in range(count)]

    async def history(self, job: Job | str, limit: int = 1000) -> list[Run]:
        """The job's history as a live instance reads it."""
        name = job if isinstance(job, str) else job.name
        reader = next((i for i in self.instances_made if not i.closed), None) or await self.instance()
        runs = list(await reader.backend.history(name, limit=limit))
        assert len(runs) <= limit, f"history({name!r}, limit={limit}) returned {len(runs)} runs"
        return runs

    async def record(self, job: Job, slot_ms: int, *, manual: bool = False) -> Run:
        """The one history record of a slot; fails when there is none or several."""
        found = [r for r in await self.history(job) if r.slot_ms == slot_ms and r.manual == manual]
        assert len(found) == 1, f"expected one history record of {job.name}@{slot_ms}, found {found!r}"
        return found[0]

    async def backend_now_ms(self) -> int:
        reader = next((i for i in self.instances_made if not i.closed), None) or await self.instance()
        return await reader.backend.now_ms()

    async def wait_past(self, moment_ms: int, *, timeout_s: float = 10.0) -> None:
        """Wait until the backend's own clock (which judges leases) passes ``moment_ms``."""

        async def passed() -> bool:
            return await self.backend_now_ms() > moment_ms

        await eventually(passed, timeout_s=timeout_s, what=f"the backend's clock to pass {moment_ms}")

    async def close(self) -> None:
        errors: list[BaseException] = []
        for scheduler in reversed(self.schedulers_made):
            try:
                await scheduler.stop(grace_ms=1000)
            except Exception as exc:
                errors.append(exc)
        for instance in reversed(self.instances_made):
            try:
                await instance.die()
            except Exception as exc:  # close every instance, then report the first failure
                errors.append(exc)
        if errors:
            raise errors[0]
