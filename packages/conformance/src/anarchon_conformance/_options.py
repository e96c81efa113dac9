"""Option checks: names, durations and windows, and the options only a lease can honour.

Every job is built through :func:`~anarchon_conformance.make_job`, which does
what ``Scheduler.add()`` does, so a backend whose ``job_options()`` or
``check_job()`` lets a bad job through fails here.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

import pytest

from anarchon.errors import InvalidJobError, UnsupportedOptionError
from anarchon.run import RunStatus

from ._base import SuiteBase
from ._harness import Conformance
from ._requires import requires

__all__ = ["BAD_NAMES", "LEASE_ONLY_OPTIONS", "OptionTests"]

#: Names that would become odd keys, queue names, subjects or paths.
BAD_NAMES = ["a.b", "a b", "../x", "ä", "a*b", "a>b", "", "x" * 101, "{tag}", "a:b", "a/b", "a\nb"]

#: A lease-only option set explicitly, with a value only a lease can honour.
LEASE_ONLY_OPTIONS: dict[str, Any] = {
    "lease_ms": 300,
    "max_takeovers": 1,
    "overlap": "skip",
    "catch_up_ms": 60_000,
    "catch_up": "coalesce",
    "hand_over": True,
}

#: The values a claim backend has; setting them explicitly is harmless.
CLAIM_TIER_VALUES: dict[str, Any] = {"overlap": "allow", "catch_up_ms": 0, "catch_up": "none", "hand_over": False}


class OptionTests(SuiteBase):
    """What ``add()`` refuses, on this backend's tier."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
    async def test_bad_job_name_is_refused(self, conformance: Conformance, name: str) -> None:
        with pytest.raises(InvalidJobError) as caught:
            conformance.make_job(name)
        assert caught.value.option == "name"

    @pytest.mark.asyncio
    async def test_every_allowed_name_works_end_to_end(self, conformance: Conformance) -> None:
        """Names of 100 characters, and of digits, '-' and '_' only, become keys that work."""
        tail = secrets.token_hex(4)
        alphabet = string.ascii_letters + string.digits + "-_"
        longest = (tail + "".join(secrets.choice(alphabet) for _ in range(100)))[:100]
        names = [longest, f"-{tail}_", f"0{tail}", f"_{tail.upper()}-x"]
        (a,) = await conformance.instances(1)
        (slot,) = conformance.slots(1)
        for name in names:
            job = conformance.make_job(name)
            result = await a.claim(job, slot)
            assert result.won, f"job {name!r}: claim answered {result.outcome}"
            assert result.grant is not None
            assert await a.finish(result.grant)
            runs = await conformance.history(job)
            assert [(r.job, r.slot_ms, r.status) for r in runs] == [(name, slot, RunStatus.SUCCEEDED)]

    @pytest.mark.asyncio
    async def test_unknown_option_is_a_type_error(self, conformance: Conformance) -> None:
        with pytest.raises(TypeError, match="lease_seconds"):
            conformance.job(lease_seconds=30)

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        ("option", "value"),
        [
            ("jitter_ms", -1),
            ("max_late_ms", 0),
            ("timeout_ms", 0),
            ("history_size", 0),
            ("jitter_ms", 1.5),
            ("timezone", "Mars/Olympus_Mons"),
        ],
    )
    async def test_bad_value_is_refused(self, conformance: Conformance, option: str, value: Any) -> None:
        with pytest.raises(InvalidJobError) as caught:
            conformance.job(**{option: value})
        assert caught.value.option == option
        assert option in str(caught.value)

    @pytest.mark.asyncio
    async def test_jitter_must_be_shorter_than_max_late(self, conformance: Conformance) -> None:
        with pytest.raises(InvalidJobError) as caught:
            conformance.job(jitter_ms=5000, max_late_ms=5000)
        assert caught.value.option == "jitter_ms"
        assert conformance.job(jitter_ms=0, max_late_ms=5000).options.jitter_ms == 0

    @pytest.mark.asyncio
    @requires(lease=False)
    @pytest.mark.parametrize("option", sorted(LEASE_ONLY_OPTIONS))
    async def test_lease_only_option_is_refused(self, conformance: Conformance, option: str) -> None:
        value = LEASE_ONLY_OPTIONS[option]
        try:
            conformance.job(**{option: value})
        except UnsupportedOptionError as exc:
            refusal = exc
        else:
            pytest.fail(
                f"{option}={value!r} was accepted, but backend {conformance.name!r} only claims: add() must raise "
                "UnsupportedOptionError (does job_options() call super() / resolve_options with the declared "
                "capabilities?)"
            )
        message = str(refusal)
        assert refusal.option == option
        assert option in message, f"the refusal does not name the option: {message}"
        assert "only claims" in message, f"the refusal does not say the backend only claims: {message}"
        for lease_backend in ("Redis", "PostgreSQL", "SQLite"):
            assert lease_backend in message, f"the refusal does not name {lease_backend}: {message}"

    @pytest.mark.asyncio
    @requires(lease=False)
    async def test_claim_tier_defaults(self, conformance: Conformance) -> None:
        """Unset lease-only options take the claim tier's values; set to those values they are accepted."""
        for job in (conformance.job(), conformance.job(**CLAIM_TIER_VALUES)):
            opts = job.options
            assert (opts.overlap, opts.catch_up_ms, opts.catch_up, opts.hand_over) == ("allow", 0, "none", False), opts

    @pytest.mark.asyncio
    @requires("lease")
    async def test_lease_options_are_honoured(self, conformance: Conformance) -> None:
        opts = conformance.job().options
        assert (opts.overlap, opts.lease_ms, opts.max_attempts, opts.catch_up_ms, opts.hand_over) == (
            "skip",
            30_000,
            3,
            3_600_000,
            True,
        ), f"a lease backend resolved the defaults to {opts}"
        chosen = conformance.job(**LEASE_ONLY_OPTIONS).options
        for option, value in LEASE_ONLY_OPTIONS.items():
            assert getattr(chosen, option) == value, f"{option}={value!r} was resolved to {getattr(chosen, option)!r}"

    @pytest.mark.asyncio
    @requires(history_ttl=False)
    async def test_history_ttl_is_refused(self, conformance: Conformance) -> None:
        with pytest.raises(UnsupportedOptionError) as caught:
            conformance.job(history_ttl_ms=86_400_000)
        assert caught.value.option == "history_ttl_ms"
        assert "history_ttl_ms" in str(caught.value)

    @pytest.mark.asyncio
    @requires("history_ttl")
    async def test_history_ttl_is_accepted(self, conformance: Conformance) -> None:
        assert conformance.job(history_ttl_ms=86_400_000).options.history_ttl_ms == 86_400_000
