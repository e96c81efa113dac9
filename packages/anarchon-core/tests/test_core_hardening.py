"""Bad input stops only itself: option bounds, error texts, foreign records, instance ids (issue 23)."""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import timezone
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anarchon import AnarchonDeprecationWarning, Capabilities, InvalidJobError, MemoryBackend, Scheduler
from anarchon._identity import check_instance_id, default_instance_id
from anarchon.errortext import ERROR_TEXT_LIMIT, clean_text, error_text
from anarchon.options import INT_BOUNDS, MAX_HISTORY_SIZE, check_history_limit
from anarchon.records import decode_run, reset_skipped, skipped_records
from anarchon.run import RunStatus


def noop() -> None:
    pass


class ClaimOnly(MemoryBackend):
    name: ClassVar[str] = "claim-only"
    capabilities: ClassVar[Capabilities] = Capabilities(lease=False, multi_process=False)


# -- option bounds -------------------------------------------------------------------


#: Options that only take their largest value beside another: catch_up_max bounds catch_up="each" (which
#: needs overlap="allow"), and retry_delay_ms may not pass retry_delay_max_ms.
COMPANIONS: dict[str, dict[str, object]] = {
    "catch_up_max": {"catch_up": "each", "overlap": "allow"},
    "retry_delay_ms": {"retry_delay_max_ms": INT_BOUNDS["retry_delay_max_ms"][1]},
    "max_wait_ms": {"group": "g"},  # it bounds the wait for a place in a group
}


# jitter_ms is left out: how large it may be also depends on the schedule (it must stay below max_late_ms).
@pytest.mark.parametrize("option", sorted(set(INT_BOUNDS) - {"jitter_ms"}))
def test_the_largest_accepted_value_of_each_option_is_kept(option: str) -> None:
    _, maximum, _ = INT_BOUNDS[option]
    # max_attempts still works, with its deprecation (max_takeovers is its new name).
    deprecated = pytest.warns(AnarchonDeprecationWarning) if option == "max_attempts" else contextlib.nullcontext()
    with deprecated:
        job = Scheduler(MemoryBackend()).add("j", "* * * * *", noop, **{option: maximum, **COMPANIONS.get(option, {})})
    assert getattr(job.options, option) == maximum


@pytest.mark.parametrize("option", sorted(INT_BOUNDS))
@pytest.mark.parametrize("over", [1, 2**31, 2**63])
def test_values_past_the_bound_are_refused_naming_option_value_and_bound(option: str, over: int) -> None:
    _, maximum, example = INT_BOUNDS[option]
    value = maximum + over
    with pytest.raises(InvalidJobError) as info:
        Scheduler(MemoryBackend()).add("j", "* * * * *", noop, **{option: value})
    message = str(info.value)
    assert info.value.option == option
    assert f"{option}={value!r}" in message
    assert f"{maximum:,}" in message
    assert f"for example {option}={example}" in message


@pytest.mark.parametrize(("option", "value"), [("catch_up_ms", False), ("hand_over", 0), ("catch_up_ms", 0.0)])
def test_claim_backends_refuse_wrong_types_as_lease_backends_do(option: str, value: object) -> None:
    for backend in (MemoryBackend(), ClaimOnly()):
        with pytest.raises(InvalidJobError, match=option) as info:
            Scheduler(backend).add("j", "* * * * *", noop, **{option: value})
        assert info.value.option == option


def test_claim_backends_still_take_the_claim_tier_values() -> None:
    job = Scheduler(ClaimOnly()).add("j", "* * * * *", noop, catch_up_ms=0, hand_over=False, lease_ms=None)
    assert job.options.catch_up_ms == 0
    assert job.options.hand_over is False


def test_a_function_with_a_required_keyword_only_argument_is_refused_at_add() -> None:
    def f(*, x: int) -> None:
        pass

    def g(*, x: int = 1) -> None:
        pass

    scheduler = Scheduler(MemoryBackend())
    with pytest.raises(InvalidJobError, match="keyword argument.*x.*defaults"):
        scheduler.add("f", "* * * * *", f)
    assert scheduler.add("g", "* * * * *", g).takes_context is False


@pytest.mark.parametrize("limit", [0, 1, 100, MAX_HISTORY_SIZE])
def test_history_limits_in_range_pass(limit: int) -> None:
    assert check_history_limit(limit) == limit


@pytest.mark.parametrize(
    ("limit", "error"),
    [
        (-1, ValueError),
        (MAX_HISTORY_SIZE + 1, ValueError),
        (2**63, ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ("10", TypeError),
        (None, TypeError),
    ],
)
def test_bad_history_limits_are_refused_before_any_driver(limit: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="limit"):
        check_history_limit(limit)


async def test_memory_history_checks_its_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        await MemoryBackend().history("j", -1)


# -- instance ids --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["web-1", "pod.ns.svc:8080", "a@b+c/d_e", "x" * 200, default_instance_id()])
def test_good_instance_ids_pass(value: str) -> None:
    assert check_instance_id(value) == value


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (123, TypeError),
        (None, TypeError),
        (b"web", TypeError),
        ("", ValueError),
        ("a\x00b", ValueError),
        ("a b", ValueError),
        ("\udcff", ValueError),
        ("x" * 201, ValueError),
        ("ä", ValueError),
    ],
)
def test_bad_instance_ids_are_refused(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="instance_id"):
        check_instance_id(value)


def test_the_default_instance_id_passes_the_check_even_for_a_strange_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "my host\x00" + "é" * 300)
    assert check_instance_id(default_instance_id())


# -- error texts ---------------------------------------------------------------------


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class ExitingStr(Exception):
    def __str__(self) -> str:
        raise SystemExit(3)


def _storable(text: str) -> None:
    text.encode("utf-8")  # strict: no lone surrogate
    assert "\x00" not in text


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ValueError("a\x00b"), "ValueError: a\\x00b"),
        (ValueError("\udcff.txt"), "ValueError: \\udcff.txt"),
        (ValueError(""), "ValueError"),
        (KeyError("k"), "KeyError: 'k'"),
        (ValueError("line\nnext\ttab"), "ValueError: line\nnext\ttab"),
    ],
)
def test_error_texts_are_escaped(exc: BaseException, expected: str) -> None:
    assert error_text(exc) == expected


@pytest.mark.parametrize("exc", [BadStr(), ExitingStr()])
def test_an_exception_whose_str_raises_still_gets_a_text(exc: BaseException) -> None:
    text = error_text(exc)
    assert text.startswith(f"{type(exc).__name__}: <unprintable {type(exc).__name__}: str() raised ")


def test_long_error_texts_are_cut_to_the_bound_with_a_marker() -> None:
    text = error_text(ValueError("x" * 2_000_000))
    assert len(text) == ERROR_TEXT_LIMIT
    assert text.endswith("...")
    assert len(error_text(ValueError("\x00" * 100), limit=10)) <= 10


@given(st.text(), st.integers(min_value=3, max_value=5000))
def test_every_text_comes_out_bounded_and_storable(text: str, limit: int) -> None:
    out = clean_text(text, limit)
    assert len(out) <= limit
    _storable(out)
    if len(text) <= limit and all(" " <= c < "\x7f" for c in text):
        assert out == text


# -- the tolerant record decoder ------------------------------------------------------

GOOD: dict[str, Any] = {
    "job": "j",
    "slot_ms": 1_791_633_610_000,
    "status": "succeeded",
    "instance": "web-1",
    "attempt": 1,
    "fencing": 4,
    "manual": False,
    "catch_up": False,
    "started_at": "2026-10-10T10:00:10+00:00",
    "finished_at": 1_791_633_611_000,
    "duration_ms": 1000,
    "error": None,
    "missed": 0,
}


def test_a_good_record_decodes_from_json_and_from_a_mapping() -> None:
    for raw in (json.dumps(GOOD), json.dumps(GOOD).encode(), GOOD):
        run = decode_run(raw, job="j")
        assert run is not None
        assert run.status is RunStatus.SUCCEEDED
        assert run.slot_ms == GOOD["slot_ms"]
        assert run.finished_at is not None and run.finished_at.tzinfo == timezone.utc
        assert run.duration_ms == 1000


FOREIGN: list[object] = [
    b"not json",
    b"\xff\xfe",
    "[1, 2]",
    "null",
    '{"slot_ms": Infinity, "status": "running", "instance": "i"}',
    '{"slot_ms": NaN, "status": "running", "instance": "i"}',
    {**GOOD, "status": "bogus"},
    {**GOOD, "slot_ms": 1e20},
    {**GOOD, "slot_ms": "12"},
    {**GOOD, "slot_ms": True},
    {**GOOD, "started_at": 10**17},
    {**GOOD, "started_at": "yesterday"},
    {**GOOD, "started_at": "2026-10-10T10:00:10"},
    {**GOOD, "instance": 5},
    {**GOOD, "attempt": 0},
    {**GOOD, "manual": "yes"},
    {**GOOD, "error": 12},
    {k: v for k, v in GOOD.items() if k != "slot_ms"},
]


@pytest.mark.parametrize("raw", FOREIGN, ids=lambda r: repr(r)[:40])
def test_a_foreign_record_is_skipped_logged_with_the_job_and_counted(
    raw: object, caplog: pytest.LogCaptureFixture
) -> None:
    reset_skipped()
    with caplog.at_level(logging.WARNING, logger="anarchon.records"):
        assert decode_run(raw, job="nightly") is None  # type: ignore[arg-type]
    assert skipped_records() == {"nightly": 1}
    assert "job nightly" in caplog.text


# -- a job calling stop(), a job blocking the loop -----------------------------------------
