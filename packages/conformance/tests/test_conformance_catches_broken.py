"""The suite must fail a broken backend, and fail it in the right tests.

Each case writes a third party's test file (as the README describes) for a
backend with one deliberate fault, runs pytest on it in this process with
``pytester`` (no ini file, so asyncio's strict mode, as many projects have),
and checks exactly which tests failed.
"""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

#: A correct claim-only backend (the one of test_conformance_third_party.py, condensed).
_DICT_BACKEND = """
import asyncio
import threading
from dataclasses import replace

import pytest
from anarchon.backend import Backend, Capabilities, ClaimResult, Grant, Outcome
from anarchon.memory import MemoryBackend, MemoryStore
from anarchon.options import resolve_options
from anarchon.run import Run, RunStatus, ms_to_datetime

from anarchon_conformance import BackendSuite


class DictStore:
    def __init__(self):
        self.lock = threading.Lock()
        self.winners = {}
        self.runs = {}


class DictBackend(Backend):
    name = "dict"
    capabilities = Capabilities(lease=False, multi_process=False)

    def __init__(self, store):
        self.store = store

    async def start(self):
        pass

    async def close(self):
        pass

    async def claim(self, claims):
        return [await self._claim(c) for c in claims]

    async def _claim(self, c):
        with self.store.lock:
            if self.store.winners.setdefault((c.job, c.slot_ms, c.manual), c.token) != c.token:
                return ClaimResult(Outcome.LOST)
            self._record(c)
        grant = Grant(c.job, c.slot_ms, c.instance, c.token, manual=c.manual, started_at_ms=c.now_ms)
        return ClaimResult(Outcome.WON, grant)

    def _record(self, c):
        runs = self.store.runs.setdefault(c.job, {})
        runs.setdefault((c.slot_ms, c.manual), Run(c.job, c.slot_ms, RunStatus.RUNNING, c.instance,
                                                   manual=c.manual, started_at=ms_to_datetime(c.now_ms)))
        for old in sorted(runs)[: -c.options.history_size]:
            del runs[old]

    async def finish(self, grant, run):
        with self.store.lock:
            self.store.runs.setdefault(grant.job, {})[(grant.slot_ms, grant.manual)] = run
        return True

    async def history(self, job, limit=100):
        with self.store.lock:
            runs = self.store.runs.get(job, {})
            return [runs[key] for key in sorted(runs, reverse=True)[:limit]]
"""

#: case -> (the backend and its suite class, tests that must fail, tests that may fail too)
_CASES: dict[str, tuple[str, set[str], set[str]]] = {
    "two_winners": (
        '''
        class RacyBackend(DictBackend):
            """Checks, yields to the event loop, then writes: racing claimers all see a free slot."""

            async def _claim(self, c):
                key = (c.job, c.slot_ms, c.manual)
                if self.store.winners.get(key, c.token) != c.token:
                    return ClaimResult(Outcome.LOST)
                await asyncio.sleep(0)  # the round trip between a read and a write
                self.store.winners[key] = c.token
                with self.store.lock:
                    self._record(c)
                return ClaimResult(Outcome.WON, Grant(c.job, c.slot_ms, c.instance, c.token, manual=c.manual,
                                                      started_at_ms=c.now_ms))


        class TestRacyBackend(BackendSuite):
            @pytest.fixture
            def backend_factory(self):
                store = DictStore()
                return lambda: RacyBackend(store)
        ''',
        {
            "test_one_winner_per_slot_among_racing_instances",
            "test_one_winner_per_slot_in_batched_claims",
        },
        # Three schedulers waking at one slot usually race inside the window too.
        {"test_scheduled_slots_run_once_across_instances"},
    ),
    "accepts_lease_options": (
        '''
        class PretendLeaseBackend(DictBackend):
            """Only claims, but resolves options as if it held leases."""

            def job_options(self, job, explicit):
                return resolve_options(job, explicit, replace(self.capabilities, lease=True), self.name)


        class TestPretendLeaseBackend(BackendSuite):
            @pytest.fixture
            def backend_factory(self):
                store = DictStore()
                return lambda: PretendLeaseBackend(store)
        ''',
        {
            "test_lease_only_option_is_refused[catch_up_ms]",
            "test_lease_only_option_is_refused[hand_over]",
            "test_lease_only_option_is_refused[lease_ms]",
            "test_lease_only_option_is_refused[max_takeovers]",
            "test_lease_only_option_is_refused[catch_up]",
            "test_lease_only_option_is_refused[overlap]",
            "test_claim_tier_defaults",
        },
        set(),
    ),
    "unbounded_history": (
        '''
        class HoardingBackend(DictBackend):
            """Never trims history."""

            def _record(self, c):
                runs = self.store.runs.setdefault(c.job, {})
                runs.setdefault((c.slot_ms, c.manual), Run(c.job, c.slot_ms, RunStatus.RUNNING, c.instance,
                                                           manual=c.manual, started_at=ms_to_datetime(c.now_ms)))


        class TestHoardingBackend(BackendSuite):
            @pytest.fixture
            def backend_factory(self):
                store = DictStore()
                return lambda: HoardingBackend(store)
        ''',
        {"test_history_size_is_kept_and_bounded"},
        set(),
    ),
    "stale_owner_renews": (
        '''
        class CarelessMemoryBackend(MemoryBackend):
            """A lease backend whose renew() says yes without checking the owner or extending the lease."""

            async def renew(self, grants):
                return [True for _ in grants]


        class TestCarelessMemoryBackend(BackendSuite):
            @pytest.fixture
            def backend_factory(self):
                store = MemoryStore()
                return lambda: CarelessMemoryBackend(store)
        ''',
        {
            "test_renewal_keeps_the_lease",
            "test_a_stale_owner_is_refused",
            "test_hand_over_lets_a_backup_take_over_at_once",
            # A renewal that does not extend the lease lets a backup take over a run waiting for its retry.
            "test_a_retry_keeps_the_lease",
            # The reference comparison renews a stale grant at step 6 of seed 0; other seeds may too.
            "test_same_answers_as_the_memory_store[0]",
        },
        {f"test_same_answers_as_the_memory_store[{seed}]" for seed in range(16)},
    ),
    "deaf_schedule_wait": (
        '''
        class DeafMemoryBackend(MemoryBackend):
            """Declares schedule_notify, but its wait sleeps through every change and says it listened."""

            async def wait_schedules(self, revision, timeout_ms):
                await asyncio.sleep(timeout_ms / 1000)
                return True


        class TestDeafMemoryBackend(BackendSuite):
            @pytest.fixture
            def backend_factory(self):
                store = MemoryStore()
                return lambda: DeafMemoryBackend(store)
        ''',
        {"test_a_change_ends_another_instances_wait", "test_a_change_notified_before_the_wait_ends_it_at_once"},
        # Its instances then poll every 10 s only, so a change reaches the fleet late.
        {"test_three_instances_follow_add_change_and_removal_slot_by_slot"},
    ),
}


#: No cache directory in the test's folder; the loop scope set, as pytest-asyncio asks every project to.
_QUIET = ("-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function")


def _failed_tests(pytester: pytest.Pytester, case: str) -> tuple[set[str], int]:
    source = _CASES[case][0]
    pytester.makepyfile(**{f"test_{case}": _DICT_BACKEND + textwrap.dedent(source)})
    result = pytester.inline_run(*_QUIET)
    passed, _skipped, failed = result.listoutcomes()
    return {report.nodeid.rsplit("::", 1)[-1] for report in failed}, len(passed)


@pytest.mark.parametrize("case", sorted(_CASES))
def test_the_suite_fails_a_broken_backend_in_the_right_tests(pytester: pytest.Pytester, case: str) -> None:
    failed, passed = _failed_tests(pytester, case)
    must_fail, may_fail = _CASES[case][1], _CASES[case][2]
    assert must_fail <= failed, f"the suite let these pass: {sorted(must_fail - failed)}"
    assert failed <= must_fail | may_fail, f"unrelated tests failed: {sorted(failed - must_fail - may_fail)}"
    assert passed > 20, "the rest of the suite should still pass on this backend"


def test_a_missing_backend_factory_says_what_to_override(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_lazy="""
        from anarchon_conformance import ClaimTests

        class TestLazy(ClaimTests):
            pass
        """
    )
    result = pytester.runpytest(*_QUIET, "-k", "new_claim")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*NotImplementedError: TestLazy.backend_factory must be overridden*"])


def test_the_summary_names_the_backend_and_its_tier(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_named="""
        import pytest
        from anarchon.memory import MemoryBackend, MemoryStore
        from anarchon_conformance import OptionTests

        class TestNamed(OptionTests):
            @pytest.fixture
            def backend_factory(self):
                store = MemoryStore()
                return lambda: MemoryBackend(store)
        """
    )
    result = pytester.runpytest(*_QUIET, "-k", "unknown_option", "-rs")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*anarchon conformance*", "test_named.py::TestNamed: backend 'memory' (*MemoryBackend), lease tier: lease*"]
    )


def test_a_silently_replaced_standard_test_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_quiet="""
        import pytest
        from anarchon.memory import MemoryBackend, MemoryStore
        from anarchon_conformance import ClaimTests

        class TestQuiet(ClaimTests):
            @pytest.fixture
            def backend_factory(self):
                store = MemoryStore()
                return lambda: MemoryBackend(store)

            @pytest.mark.asyncio
            async def test_a_new_claim_of_a_won_slot_loses(self, conformance):
                pass

            @pytest.mark.asyncio
            @pytest.mark.xfail(reason="this backend's clock is a counter, not epoch time", strict=True)
            async def test_now_ms_is_epoch_milliseconds(self, conformance):
                assert False
        """
    )
    result = pytester.runpytest(*_QUIET, "-k", "new_claim or now_ms")
    result.assert_outcomes(errors=1, xfailed=1)
    result.stdout.fnmatch_lines(
        ["*TestQuiet.test_a_new_claim_of_a_won_slot_loses replaces a standard conformance test*"]
    )
