"""Every check add() makes, with the message a user would read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from anarchon import (
    AnarchonDeprecationWarning,
    Backend,
    Capabilities,
    Claim,
    ClaimResult,
    Grant,
    InvalidJobError,
    MemoryBackend,
    Run,
    Scheduler,
    UnsupportedOptionError,
)


def noop() -> None:
    pass


class ClaimOnlyBackend(Backend):
    """The memory store behind a claim-tier declaration: how the core treats the claim-tier brokers."""

    name: ClassVar[str] = "claim-only"
    capabilities: ClassVar[Capabilities] = Capabilities(lease=False, history_ttl=False, multi_process=False)

    def __init__(self) -> None:
        self._memory = MemoryBackend()

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        return await self._memory.claim(claims)

    async def finish(self, grant: Grant, run: Run) -> bool:
        return await self._memory.finish(grant, run)

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        return await self._memory.history(job, limit)


@pytest.fixture
def scheduler() -> Scheduler:
    return Scheduler(MemoryBackend())


@pytest.fixture
def claim_scheduler() -> Scheduler:
    return Scheduler(ClaimOnlyBackend())


BAD_NAMES = ["a.b", "a b", "../x", "ä", "a*b", "a>b", "", "x" * 101, "a/b", "a:b", "{a}", "a\nb", "tab\t", "a$"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_job_names_are_refused(scheduler: Scheduler, name: str) -> None:
    with pytest.raises(InvalidJobError, match="job name") as info:
        scheduler.add(name, "* * * * *", noop)
    assert repr(name) in str(info.value)
    assert "letters, digits" in str(info.value)
    assert name not in scheduler.jobs


@pytest.mark.parametrize("name", ["a", "A-b_9", "x" * 100, "nightly-report"])
def test_good_job_names_are_kept(scheduler: Scheduler, name: str) -> None:
    assert scheduler.add(name, "* * * * *", noop).name == name


@pytest.mark.parametrize(
    ("cron", "timezone"),
    [
        ("61 * * * *", "UTC"),
        ("* * *", "UTC"),
        ("not a cron", "UTC"),
        ("@reboot", "UTC"),
        ("* * * * * * *", "UTC"),
        ("* * * * *", "Mars/Olympus"),
        ("* * * * *", ""),
    ],
)
def test_bad_schedules_are_refused(scheduler: Scheduler, cron: str, timezone: str) -> None:
    with pytest.raises(InvalidJobError) as info:
        scheduler.add("job", cron, noop, timezone=timezone)
    message = str(info.value)
    assert "'job'" in message
    assert (repr(cron) in message) or (repr(timezone) in message)


BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"jitter_ms": -1}, "jitter_ms=-1"),
    ({"jitter_ms": 1.5}, "jitter_ms=1.5"),
    ({"max_late_ms": 0}, "max_late_ms=0"),
    ({"max_late_ms": -5}, "max_late_ms=-5"),
    ({"timeout_ms": 0}, "timeout_ms=0"),
    ({"timeout_ms": "10s"}, "timeout_ms='10s'"),
    ({"history_size": 0}, "history_size=0"),
    ({"history_ttl_ms": -1}, "history_ttl_ms=-1"),
    ({"lease_ms": 0}, "lease_ms=0"),
    ({"lease_ms": 50}, "lease_ms=50"),
    ({"max_attempts": 0}, "max_attempts=0"),
    ({"catch_up_ms": -1}, "catch_up_ms=-1"),
    ({"overlap": "queue"}, "overlap='queue'"),
    ({"hand_over": "yes"}, "hand_over='yes'"),
    ({"jitter_ms": True}, "jitter_ms=True"),
    ({"jitter_ms": 60_000}, "jitter_ms=60000"),
    ({"jitter_ms": 5000, "max_late_ms": 1000}, "jitter_ms=5000"),
]


@pytest.mark.parametrize(("options", "shown"), BAD_OPTIONS)
def test_bad_option_values_name_option_value_and_backend(
    scheduler: Scheduler, options: dict[str, Any], shown: str
) -> None:
    with pytest.raises(InvalidJobError) as info:
        scheduler.add("job", "* * * * *", noop, **options)
    message = str(info.value)
    assert shown in message
    assert "'memory'" in message
    assert info.value.option == shown.split("=")[0]
    assert "job" not in scheduler.jobs


def test_unknown_option_is_a_type_error_listing_the_options(scheduler: Scheduler) -> None:
    with pytest.raises(TypeError, match="unknown option.*jiter_ms.*jitter_ms"):
        scheduler.add("job", "* * * * *", noop, jiter_ms=5)


def test_function_with_two_required_arguments_is_refused(scheduler: Scheduler) -> None:
    def two(a: object, b: object) -> None:
        pass

    with pytest.raises(InvalidJobError, match="requires 2 arguments"):
        scheduler.add("job", "* * * * *", two)


def test_not_callable_is_refused(scheduler: Scheduler) -> None:
    with pytest.raises(InvalidJobError, match="not callable"):
        scheduler.add("job", "* * * * *", "print")  # type: ignore[arg-type]


def test_duplicate_name_is_refused(scheduler: Scheduler) -> None:
    scheduler.add("job", "* * * * *", noop)
    with pytest.raises(ValueError, match="already added"):
        scheduler.add("job", "* * * * *", noop)


@pytest.mark.parametrize(
    ("option", "value"),
    [("lease_ms", 10_000), ("max_takeovers", 1), ("overlap", "skip"), ("catch_up_ms", 60_000), ("hand_over", True)],
)
def test_lease_only_options_are_refused_on_a_claim_backend(
    claim_scheduler: Scheduler, option: str, value: object
) -> None:
    with pytest.raises(UnsupportedOptionError) as info:
        claim_scheduler.add("job", "* * * * *", noop, **{option: value})
    message = str(info.value)
    assert f"{option}={value!r}" in message
    assert "only claims" in message
    assert "Redis, PostgreSQL or SQLite" in message


def test_claim_values_of_lease_options_are_accepted_on_a_claim_backend(claim_scheduler: Scheduler) -> None:
    job = claim_scheduler.add("job", "* * * * *", noop, overlap="allow", catch_up_ms=0, hand_over=False)
    assert (job.options.overlap, job.options.catch_up_ms, job.options.hand_over) == ("allow", 0, False)


def test_history_ttl_is_refused_where_history_is_trimmed_by_count(claim_scheduler: Scheduler) -> None:
    with pytest.raises(UnsupportedOptionError, match="history_ttl_ms=1000.*by count only"):
        claim_scheduler.add("job", "* * * * *", noop, history_ttl_ms=1000)


def test_defaults_follow_the_backend_tier(scheduler: Scheduler, claim_scheduler: Scheduler) -> None:
    lease = scheduler.add("job", "* * * * *", noop).options
    claim = claim_scheduler.add("job", "* * * * *", noop).options
    assert (lease.overlap, lease.catch_up_ms, lease.hand_over) == ("skip", 3_600_000, True)
    assert (claim.overlap, claim.catch_up_ms, claim.hand_over) == ("allow", 0, False)
    assert lease.jitter_ms == claim.jitter_ms == 2000
    assert lease.max_late_ms == 60_000 and lease.lease_ms == 30_000 and lease.max_attempts == 3


def test_the_default_jitter_fits_the_schedule(scheduler: Scheduler) -> None:
    """A jitter longer than the gap between slots would let a slot's claim come after the next one's."""
    assert scheduler.add("every-second", "* * * * * *", noop).options.jitter_ms == 250
    assert scheduler.add("every-5s", "*/5 * * * * *", noop).options.jitter_ms == 1250
    assert scheduler.add("two-a-minute", "0,30 * * * * *", noop).options.jitter_ms == 2000
    assert scheduler.add("minutely", "* * * * *", noop).options.jitter_ms == 2000
    assert scheduler.add("quiet", "* * * * * *", noop, jitter_ms=0).options.jitter_ms == 0


def test_an_explicit_jitter_not_shorter_than_the_gap_is_refused(scheduler: Scheduler) -> None:
    with pytest.raises(InvalidJobError, match=r"jitter_ms=1000 is not shorter than the 1000 ms.*below 1000") as info:
        scheduler.add("tick", "* * * * * *", noop, jitter_ms=1000)
    assert (info.value.option, info.value.value) == ("jitter_ms", 1000)
    with pytest.raises(InvalidJobError, match="jitter_ms=90000 is not shorter than the 60000 ms"):
        scheduler.add("minutely", "* * * * *", noop, jitter_ms=90_000, max_late_ms=120_000)
    assert scheduler.add("tick", "* * * * * *", noop, jitter_ms=999).options.jitter_ms == 999


def test_the_claim_tier_takes_no_catch_up_policy_but_retries(claim_scheduler: Scheduler) -> None:
    """A claim backend cannot catch up, so a policy other than "none" is refused; retries need no lease."""
    assert claim_scheduler.add("quiet", "* * * * *", noop, catch_up="none").options.catch_up == "none"
    assert claim_scheduler.add("plain", "* * * * *", noop).options.catch_up == "none"
    with pytest.raises(UnsupportedOptionError, match="catch_up='coalesce' needs a lease"):
        claim_scheduler.add("job", "* * * * *", noop, catch_up="coalesce")
    with pytest.raises(UnsupportedOptionError, match="max_takeovers=1 needs a lease"):
        claim_scheduler.add("job", "* * * * *", noop, max_takeovers=1)
    assert claim_scheduler.add("flaky", "* * * * *", noop, retries=3).options.retries == 3


def test_max_takeovers_is_max_attempts_renamed(scheduler: Scheduler) -> None:
    """The old name still works, warning with the new name and the value that keeps the limit."""
    assert scheduler.add("new", "* * * * *", noop, max_takeovers=0).options.max_attempts == 1
    assert scheduler.add("default", "* * * * *", noop).options.max_takeovers == 2
    with pytest.warns(
        AnarchonDeprecationWarning, match=r"max_attempts is deprecated.*max_takeovers=4.*retries"
    ) as caught:
        old = scheduler.add("old", "* * * * *", noop, max_attempts=5)
    assert caught[0].filename == __file__, "the warning points at the add() call"
    assert (old.options.max_attempts, old.options.max_takeovers) == (5, 4)
    with pytest.raises(InvalidJobError, match="set max_takeovers only"):
        scheduler.add("both", "* * * * *", noop, max_takeovers=1, max_attempts=2)
    with pytest.raises(InvalidJobError, match="max_takeovers=-1"):
        scheduler.add("negative", "* * * * *", noop, max_takeovers=-1)


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"retries": -1}, "retries=-1"),
        ({"retries": 1001}, "retries=1001"),
        ({"retries": 2.0}, "retries=2.0"),
        ({"retry_delay_ms": -5}, "retry_delay_ms=-5"),
        ({"retry_delay_ms": 10_000, "retry_delay_max_ms": 5000}, "retry_delay_ms=10000"),
        ({"retry_jitter": "no"}, "retry_jitter='no'"),
    ],
)
def test_bad_retry_options_name_the_option_and_the_fix(
    scheduler: Scheduler, options: dict[str, Any], shown: str
) -> None:
    with pytest.raises(InvalidJobError) as info:
        scheduler.add("job", "* * * * *", noop, **options)
    assert shown in str(info.value)
    assert info.value.option == shown.split("=")[0]
