"""The guarantee report (capability ``guarantees``): what the referee as configured promises.

A backend with ``guarantees`` answers :meth:`~anarchon.backend.Backend.guarantees`
with findings a user can act on (a topic, a detail, a fix for each that is
not ok), reads only, and answers the same twice in a row; the scheduler logs
it at start. A backend without it is reported as giving no report, never as
safe. Which settings each backend must flag is tested beside each backend, on
servers set up to have them.
"""

from __future__ import annotations

import logging

import pytest

from anarchon.backend import Finding, Outcome
from anarchon.guarantees import check_findings, read_guarantees

from ._base import SuiteBase
from ._harness import Conformance
from ._requires import gated
from .testing import eventually

__all__ = ["GuaranteeReportTests", "NoGuaranteeReportTests"]


@gated("guarantees")
class GuaranteeReportTests(SuiteBase):
    """The contract of :meth:`~anarchon.backend.Backend.guarantees`."""

    async def test_the_report_says_what_holds_and_how_to_fix_what_does_not(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        findings = check_findings(await a.backend.guarantees())
        assert all(isinstance(f, Finding) for f in findings)
        again = await a.backend.guarantees()
        assert [(f.topic, f.ok) for f in again] == [(f.topic, f.ok) for f in findings], (
            "the report changed between two reads with nothing changed on the server"
        )

    async def test_the_report_reads_only_and_the_backend_claims_after_it(self, conformance: Conformance) -> None:
        a, b = await conformance.instances(2)
        job = conformance.job("guar")
        await a.backend.guarantees()
        assert await conformance.history(job) == [], "reading the report wrote a run"
        (slot,) = conformance.slots(1)
        assert (await b.claim(job, slot)).outcome is Outcome.WON, "a claim after the report was not won"

    async def test_the_scheduler_logs_the_report_once_at_start(
        self, conformance: Conformance, caplog: pytest.LogCaptureFixture
    ) -> None:
        def logged() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.name == "anarchon.guarantees"]

        with caplog.at_level(logging.INFO, logger="anarchon.guarantees"):
            scheduler = await conformance.scheduler()
            expected = check_findings(await scheduler.backend.guarantees())
            await eventually(lambda: len(logged()) >= len(expected), what="the report in the log")
        assert len(logged()) == len(expected), [r.getMessage() for r in logged()]
        for f, record in zip(expected, logged(), strict=True):
            assert f.detail in record.getMessage(), (f, record.getMessage())
            assert record.levelno == (logging.INFO if f.ok else logging.WARNING), (f, record.levelname)


@gated(guarantees=False)
class NoGuaranteeReportTests(SuiteBase):
    """Without ``guarantees`` the report says there is none: a referee nobody checked is not called safe."""

    async def test_no_report_is_reported_as_not_ok(self, conformance: Conformance) -> None:
        (a,) = await conformance.instances(1)
        (finding,) = await read_guarantees(a.backend)
        assert not finding.ok and "does not report" in finding.detail and finding.fix
