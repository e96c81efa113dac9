"""The fleet registry (capability ``registry``): entries every instance reads, and drift settled once.

A backend with ``registry`` stores each instance's head and job definitions
(:mod:`anarchon.fleet`), returns only live instances' heads, and forgets a
stopped instance's entry; on it, a rolling deploy that changes a job's
schedule runs one definition, the newest, within seconds, and every slot of
it once. A backend without it refuses the calls naming the capability, and
its schedulers run as before.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from anarchon.context import RunContext
from anarchon.errors import UnsupportedOperationError
from anarchon.fleet import REGISTRY_TTL_MS, read_fleet

from ._base import SuiteBase
from ._harness import Conformance, Instance
from ._jobs import unique_name
from ._requires import gated, requires
from .testing import eventually, registry_entry

__all__ = ["RegistryRefusalTests", "RegistryTests"]

#: The issue's bound: instances holding a superseded definition stop claiming within this of the new one.
DETECTION_S = 3.0


def _entry(conformance: Conformance, instance: str, started_ms: int, **crons: str) -> tuple[str, str]:
    return registry_entry(conformance._probe(), instance, crons, started_ms=started_ms)


async def _beating_entry(conformance: Conformance, ttl_ms: int) -> tuple[Instance, Instance]:
    """Two instances: the first beats once with ``ttl_ms`` and registers an entry; the second reads."""
    a, b = await conformance.instances(2)
    await a.beat(ttl_ms)
    head, jobs = _entry(conformance, a.id, 1000, **{unique_name("reg"): "* * * * * *"})
    await a.backend.register(a.id, head, jobs)
    return a, b


@gated("registry")
class RegistryTests(SuiteBase):
    """Entries are shared, replaced, removed, and leave with their instance; drift runs one definition."""

    async def test_an_entry_is_read_by_every_instance_replaced_and_removed(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        job = unique_name("reg")
        head, jobs = _entry(conformance, a.id, 1000, **{job: "*/5 * * * * *"})
        await a.backend.register(a.id, head, jobs)
        seen = {i: h for i, h, _ in await b.backend.registered()}
        assert seen.get(a.id) == head, f"another instance reads {seen.get(a.id)!r}, not the head written"
        assert await b.backend.registered_jobs([a.id, "nobody"]) == {a.id: jobs}
        head2, jobs2 = _entry(conformance, a.id, 1000, **{job: "* * * * * *"})
        await a.backend.register(a.id, head2, jobs2)
        await a.backend.keep_registered(a.id)
        assert {i: h for i, h, _ in await b.backend.registered()}.get(a.id) == head2, "register() did not replace"
        fleet = await read_fleet(b.backend)
        (info,) = [i for i in fleet.instances if i.instance == a.id]
        assert (info.host, info.pid, info.version, info.jobs) == ("host-a", 4242, "1.0", 1)
        assert fleet.definitions[a.id][job].cron == "* * * * * *"
        await a.backend.unregister(a.id)
        assert a.id not in {i for i, _, _ in await b.backend.registered()}, "unregister() left the entry live"

    async def test_a_foreign_entry_is_skipped_not_fatal(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        await a.backend.register(a.id, "not json {", "[]")
        head, jobs = _entry(conformance, b.id, 1000, **{unique_name("reg"): "* * * * * *"})
        await b.backend.register(b.id, head, jobs)
        fleet = await read_fleet(b.backend)
        assert [i.instance for i in fleet.instances if i.instance in (a.id, b.id)] == [b.id]

    @requires("liveness")
    async def test_an_entry_leaves_with_its_instance_heartbeat(self, conformance: Conformance) -> None:
        a, b = await _beating_entry(conformance, 300)
        assert a.id in {i for i, _, _ in await b.backend.registered()}
        await a.stop_beating()  # as after kill -9: the heartbeat record expires by itself

        async def gone() -> bool:
            return a.id not in {i for i, _, _ in await b.backend.registered()}

        await eventually(gone, timeout_s=5, what="the dead instance's entry to stop counting as live")

    @requires("liveness")
    async def test_an_entry_lives_by_its_heartbeat_without_being_kept(self, conformance: Conformance) -> None:
        """Issue 37: a beating instance refreshes its entry every 3 s, not every poll; it stays live meanwhile."""
        a, b = await _beating_entry(conformance, 1500)
        until = time.monotonic() + REGISTRY_TTL_MS / 1000 + 1.5
        while time.monotonic() < until:  # beats, and no keep_registered(), past the entry's TTL
            await asyncio.sleep(0.4)
            await a.beat(1500)
            assert a.id in {i for i, _, _ in await b.backend.registered()}, "a beating instance's entry left"
        (seen,) = [s for i, _, s in await b.backend.registered() if i == a.id]
        assert seen is not None and seen > int(time.time() * 1000) - 3000, f"seen_ms {seen} is not the last beat"

    @requires(liveness=False)
    async def test_an_entry_not_kept_expires(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        head, jobs = _entry(conformance, a.id, 1000, **{unique_name("reg"): "* * * * * *"})
        await a.backend.register(a.id, head, jobs)
        assert a.id in {i for i, _, _ in await b.backend.registered()}
        await a.backend.keep_registered(a.id)
        kept = time.monotonic()

        async def gone() -> bool:
            return a.id not in {i for i, _, _ in await b.backend.registered()}

        await eventually(gone, timeout_s=REGISTRY_TTL_MS / 1000 + 5, what="an entry nobody kept to expire")
        assert time.monotonic() - kept >= REGISTRY_TTL_MS / 1000 * 0.9, "the entry expired before its TTL"

    async def test_a_stopped_scheduler_leaves_the_registry(self, conformance: Conformance) -> None:
        job = unique_name("reg")
        s = await conformance.scheduler(start=False, version="7.1")
        s.add(job, "0 0 1 1 *", lambda: None)
        await s.start()
        fleet = await (await conformance.instance()).backend.registered()
        assert s.instance_id in {i for i, _, _ in fleet}
        view = await s.fleet()
        (info,) = [i for i in view.instances if i.instance == s.instance_id]
        assert (info.version, info.jobs) == ("7.1", 1)
        await s.stop()
        reader = await conformance.instance()
        assert s.instance_id not in {i for i, _, _ in await reader.backend.registered()}

    @pytest.mark.parametrize(
        ("old_cron", "new_cron"), [("*/2 * * * * *", "* * * * * *"), ("* * * * * *", "*/2 * * * * *")]
    )
    async def test_a_rolling_deploy_runs_the_newest_definition_each_slot_once(
        self, conformance: Conformance, old_cron: str, new_cron: str
    ) -> None:
        job, steady = unique_name("deploy"), unique_name("same")
        ran: Counter[tuple[str, int]] = Counter()

        def recorder(release: str) -> Any:
            return lambda ctx: ran.update([(release, ctx.slot_ms)])

        old = await conformance.scheduler(start=False, version="1.4.2")
        old.add(job, old_cron, recorder("old"), jitter_ms=0)
        old.add(steady, "0 0 1 1 *", lambda: None)
        await old.start()
        await asyncio.sleep(1.1)
        new = await conformance.scheduler(start=False, version="1.5.0")
        new.add(job, new_cron, recorder("new"), jitter_ms=0)
        new.add(steady, "0 0 1 1 *", lambda: None)
        await new.start()
        assert new.superseded == frozenset(), "the newest release yielded its own definition"
        await eventually(
            lambda: job in old.superseded, timeout_s=DETECTION_S, what="the old release to stop claiming the job"
        )
        detected_ms = int(time.time() * 1000)
        assert steady not in old.superseded, "a job defined alike everywhere was taken for drift"
        await asyncio.sleep(4.2)
        await old.stop()
        await new.stop()
        late = sorted(slot for release, slot in ran if release == "old" and slot > detected_ms)
        assert not late, f"the superseded definition still ran slots {late} after it was detected"
        assert max(ran.values()) == 1, f"a slot ran twice: {[k for k, n in ran.items() if n > 1]}"
        step = 2000 if new_cron.startswith("*/2") else 1000
        first = (detected_ms // step + 1) * step
        window = [s for s in range(first, detected_ms + 3000, step)]
        ran_new = {slot for release, slot in ran if release == "new"}
        missing = [s for s in window if s not in ran_new]
        assert not missing, f"slots {missing} of the newest definition did not run"
        if step == 2000:
            odd = sorted(s for _, s in ran if s > detected_ms and s % 2000)
            assert not odd, f"slots {odd} that only the superseded definition has ran"


@gated(registry=False)
class RegistryRefusalTests(SuiteBase):
    """Without ``registry`` the calls are refused naming the capability; schedulers run as before."""

    async def test_the_registry_is_refused_naming_the_capability(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        with pytest.raises(UnsupportedOperationError, match="'registry'") as caught:
            await a.backend.register(a.id, "{}", "{}")
        assert caught.value.capability == "registry"
        with pytest.raises(UnsupportedOperationError):
            await a.backend.registered()
        ran = asyncio.Event()

        def run(ctx: RunContext) -> None:
            ran.set()

        s = await conformance.scheduler(start=False)
        s.add(unique_name("noreg"), "* * * * * *", run, jitter_ms=0)
        await s.start()
        await asyncio.wait_for(ran.wait(), 5)
        with pytest.raises(UnsupportedOperationError):
            await s.fleet()
