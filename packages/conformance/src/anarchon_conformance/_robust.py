"""Bad input stops only itself: foreign records, unstorable error texts, the largest accepted options.

A store is shared with other programs and other versions, and error texts
are whatever a job raised. A backend must therefore:

* read history past a record it cannot decode (skip it, never raise for the
  whole job). The suite plants one through the ``plant_foreign_record``
  fixture, which the backend's test file provides, since only it knows how to
  write into its store behind the backend's back; without that fixture the
  test is skipped and says so;
* store a final record whatever the error text holds (NUL, a lone surrogate,
  megabytes): ``finish()`` passes it through :func:`anarchon.errortext.clean_text`
  or stores it as it is, but never fails or leaves the run ``running``;
* hold the largest value ``add()`` accepts for every option;
* end every run it granted recorded in a final status, for random error
  texts and option values (a Hypothesis property test).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anarchon.backend import Backend, Claim
from anarchon.errors import InvalidJobError
from anarchon.options import INT_BOUNDS, MAX_ATTEMPTS, MAX_DURATION_MS, MAX_HISTORY_SIZE
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import BackendFactory, Conformance
from ._jobs import finished_run, make_job, now_ms, unique_name

__all__ = ["HistoryLimitTests", "PlantForeignRecord", "RobustnessTests", "SchedulerRobustnessTests"]

#: ``await plant(backend, job_name, slot_ms)``: write, behind the started backend's back, a record of
#: that job and slot that this version cannot read (not JSON, a wrong type, status ``bogus``, a time
#: beyond ``datetime``: as many kinds as the store allows).
PlantForeignRecord = Callable[[Backend, str, int], Awaitable[None]]

UNSTORABLE = "ValueError: a\x00b \udcff " + "x" * 1_500_000
FINAL = [s for s in RunStatus if s.final and s not in (RunStatus.SKIPPED, RunStatus.ABANDONED)]


def largest_options(backend: Backend) -> dict[str, Any]:
    """The largest value ``add()`` accepts for each option this backend takes.

    ``jitter_ms`` and ``max_late_ms`` keep their defaults: claim backends bound
    them by their own window (``slot_ttl_ms``, ``duplicate_window_ms``).
    """
    options: dict[str, Any] = {"history_size": MAX_HISTORY_SIZE, "timeout_ms": MAX_DURATION_MS}
    if backend.capabilities.lease:
        options.update(lease_ms=MAX_DURATION_MS, max_takeovers=MAX_ATTEMPTS - 1, catch_up_ms=MAX_DURATION_MS)
    if backend.capabilities.history_ttl:
        options["history_ttl_ms"] = MAX_DURATION_MS
    return options


class RobustnessTests(SuiteBase):
    """What no input may do to a backend. Every backend."""

    @pytest.fixture
    def plant_foreign_record(self) -> PlantForeignRecord:
        """Override me in the backend's test file (see :data:`PlantForeignRecord`); skipped otherwise."""
        pytest.skip(
            "this backend's test file provides no `plant_foreign_record` fixture, so the suite cannot write "
            "a record the backend did not write; provide one (see anarchon_conformance._robust)"
        )

    @pytest.mark.asyncio
    async def test_history_reads_past_a_foreign_record(
        self, conformance: Conformance, plant_foreign_record: PlantForeignRecord
    ) -> None:
        job = conformance.job("foreign", overlap="allow")
        (a,) = await conformance.instances(1)
        good, planted = conformance.slots(2)
        result = await a.claim(job, good)
        assert result.grant is not None
        assert await a.finish(result.grant)
        await plant_foreign_record(a.backend, job.name, planted)
        runs = await conformance.history(job)
        assert [(r.slot_ms, r.status) for r in runs if r.slot_ms == good] == [(good, RunStatus.SUCCEEDED)], (
            f"history() with a foreign record in it lost the good run: {runs!r}"
        )
        assert all(r.status in RunStatus for r in runs)
        assert (await a.backend.last_run(job.name)) is not None

    @pytest.mark.asyncio
    async def test_an_unstorable_error_text_is_stored_as_a_final_record(self, conformance: Conformance) -> None:
        job = conformance.job("errtext", overlap="allow")
        (a,) = await conformance.instances(1)
        (slot,) = conformance.slots(1)
        result = await a.claim(job, slot)
        assert result.grant is not None
        assert await a.finish(result.grant, RunStatus.FAILED, error=UNSTORABLE), (
            "finish() refused an error text holding NUL, a lone surrogate and 1.5 MB: the run would stay running"
        )
        record = await conformance.record(job, slot)
        assert record.status is RunStatus.FAILED
        assert record.error is not None and record.error.startswith("ValueError: a")

    @pytest.mark.asyncio
    async def test_the_largest_accepted_options_are_stored(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        job = conformance.job("largest", overlap="allow", **largest_options(a.backend))
        (slot,) = conformance.slots(1)
        result = await a.claim(job, slot)
        assert result.won and result.grant is not None
        if conformance.lease:
            assert await a.renew(result.grant)
            assert await a.take_over(job) == []  # the lease is ten years long: nothing to take over
            marks = await a.leases.marks([job])
            assert marks[job.name] == slot
        assert await a.finish(result.grant)
        assert (await conformance.record(job, slot)).status is RunStatus.SUCCEEDED

    @pytest.mark.parametrize(("option", "value"), [("catch_up_ms", False), ("hand_over", 0), ("history_size", 2**63)])
    def test_options_of_the_wrong_type_or_size_are_refused_on_every_tier(
        self, conformance: Conformance, option: str, value: object
    ) -> None:
        with pytest.raises(InvalidJobError, match=option):
            conformance.job("types", **{option: value})

    @pytest.mark.asyncio
    async def test_random_error_texts_and_options_end_in_a_final_status(
        self, conformance: Conformance, backend_factory: BackendFactory
    ) -> None:
        """A property test: every run granted ends recorded in the final status it finished with."""
        lease = conformance.lease
        bounds = {
            k: v
            for k, v in INT_BOUNDS.items()
            # max_attempts is deprecated (max_takeovers replaces it): the core's tests cover the old name.
            if k != "max_attempts" and (lease or k not in ("lease_ms", "max_takeovers", "catch_up_ms", "catch_up_max"))
        }
        if not conformance.capabilities.history_ttl:
            bounds.pop("history_ttl_ms")
        option_values = st.dictionaries(
            st.sampled_from(sorted(bounds)),
            st.one_of(
                st.integers(min_value=-5, max_value=2**64),
                st.sampled_from([b for lo, hi, _ in bounds.values() for b in (lo, hi, hi + 1)]),
                st.booleans(),
                st.none(),
            ),
            max_size=4,
        )

        hostile = st.one_of(st.characters(exclude_categories=[]), st.sampled_from(["\x00", "\udcff", "\ud83d"]))
        errors = st.one_of(st.none(), st.just(UNSTORABLE), st.lists(hostile, max_size=300).map("".join))

        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(error=errors, status=st.sampled_from(FINAL), options=option_values)
        def example(error: str | None, status: RunStatus, options: dict[str, Any]) -> None:
            asyncio.run(self._one_run(backend_factory, error, status, options))

        await asyncio.to_thread(example)

    @staticmethod
    async def _one_run(factory: BackendFactory, error: str | None, status: RunStatus, options: dict[str, Any]) -> None:
        backend = factory()
        try:
            job = make_job(backend, unique_name("prop"), **{"overlap": "allow", **options})
        except (InvalidJobError, TypeError):
            return  # refused at add(), with the error add() raises: nothing was stored
        await backend.start()
        try:
            await backend.prepare([job])
            slot = now_ms() // 1000 * 1000
            claim = Claim(job.name, slot, "prop-1", unique_name("t"), now_ms(), spec=job)
            (result,) = await backend.claim([claim])
            assert result.won and result.grant is not None, f"a fresh job's first claim answered {result!r}"
            assert await backend.finish(result.grant, finished_run(result.grant, status, error=error))
            found = [r for r in await backend.history(job.name, limit=10) if r.slot_ms == slot]
            assert [r.status for r in found] == [status], f"options {options!r}, error {error!r}: {found!r}"
        finally:
            await backend.close()


class SchedulerRobustnessTests(SuiteBase):
    """Through the scheduler: a job's unstorable error ends recorded ``failed``, on every backend."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize("message", ["a\x00b", "\udcff.txt", "x" * 1_500_000])
    async def test_a_job_raising_an_unstorable_error_is_recorded_failed(
        self, conformance: Conformance, message: str
    ) -> None:
        def job() -> None:
            raise ValueError(message)

        name = unique_name("raises")
        scheduler = await conformance.scheduler()
        scheduler.add(name, "0 0 1 1 *", job)
        run = await asyncio.wait_for(scheduler.run_now(name), 60)
        assert run.status is RunStatus.FAILED, f"run_now() of a job raising ValueError({message[:20]!r}) gave {run!r}"
        (stored,) = await scheduler.history(name)
        assert stored.status is RunStatus.FAILED
        assert stored.error is not None and stored.error.startswith("ValueError: ")


class HistoryLimitTests(SuiteBase):
    """Opt-in, not part of :class:`BackendSuite`: ``history()`` checks its ``limit`` before its driver sees it.

    The repository's backends do (with :func:`anarchon.options.check_history_limit`);
    add this mixin to your suite class to hold yours to it too.
    """

    @pytest.mark.asyncio
    @pytest.mark.parametrize(("limit", "error"), [(-1, ValueError), (MAX_HISTORY_SIZE + 1, ValueError),
                                                  (True, TypeError), (1.5, TypeError), ("10", TypeError)])  # fmt: skip
    async def test_history_refuses_a_bad_limit_before_the_driver_sees_it(
        self, conformance: Conformance, limit: object, error: type[Exception]
    ) -> None:
        (a,) = await conformance.instances(1)
        with pytest.raises(error, match="limit"):
            await a.backend.history(unique_name("limit"), limit)  # type: ignore[arg-type]
        assert await a.backend.history(unique_name("limit"), 0) == []
