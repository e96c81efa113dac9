"""What ``chaos.rolling`` and ``chaos.churn`` share: a fleet of the conformance suite's instances, something
done to it for minutes, and the ledger reconciled at the end."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from anarchon_conformance.fleet import Fleet

__all__ = ["run_and_report"]


def run_and_report(what: str, backend: str, instances: int, jobs: int, act: Callable[[Fleet], int]) -> None:
    """Start the fleet, ``act`` on it (it returns how many changes it made), stop it and print the verdict."""
    with tempfile.TemporaryDirectory() as tmp, Fleet(Path(tmp), backend=backend, instances=instances, jobs=jobs) as f:
        f.start(timeout=120)
        since = (f.ready_ms or 0) + 1000
        changes = act(f)
        f.stop()
        report = f.report(since_ms=since)
    print(f"{what}, {changes} changes, backend {backend}: {report.summary()}")
    if report.duplicate_slots or report.missed_slots:
        print(f"run twice: {report.duplicate_slots[:10]}; missed: {report.missed_slots[:10]}")
