"""The anarchon backend conformance suite, a pytest plugin.

A backend author subclasses :class:`BackendSuite` (or some of its mixins) and
overrides one fixture, ``backend_factory``; the suite reads the backend's
declared capabilities and runs what applies. See the package README.

Importing this package is light: pytest loads :mod:`anarchon_conformance.plugin`
in every session where the suite is installed, so the tests themselves are
imported only when a name below is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._attempts import AttemptTests
    from ._audit import AuditRefusalTests, AuditTests
    from ._backfill import BackfillRefusalTests, BackfillTests
    from ._base import SuiteBase
    from ._claim import ClaimTests
    from ._control import PauseRefusalTests, PauseTests, TriggerRefusalTests, TriggerTests
    from ._control_notify import ControlNotifyTests
    from ._decided import DecidedNotifyTests
    from ._fleet_tests import FleetTests
    from ._groups import GroupRefusalTests, GroupTests
    from ._guarantees import GuaranteeReportTests, NoGuaranteeReportTests
    from ._harness import BackendFactory, Conformance, Instance
    from ._history import HISTORY_SLACK, HistoryTests
    from ._jobs import EVERY_SECOND, finished_run, make_job, unique_name
    from ._lease import LEASE_MS, LeaseTests
    from ._liveness import LivenessTests
    from ._options import OptionTests
    from ._policies import PolicyTests
    from ._ports import free_port
    from ._reference import ReferenceTests
    from ._registry import RegistryRefusalTests, RegistryTests
    from ._requires import gated, requires
    from ._revive import ReviveTests
    from ._robust import HistoryLimitTests, PlantForeignRecord, RobustnessTests, SchedulerRobustnessTests
    from ._schedule_notify import ScheduleNotifyTests
    from ._scheduler import SchedulerTests
    from ._schedules import ScheduleStoreRefusalTests, ScheduleStoreTests, StoredScheduleFleetTests
    from ._suite import BackendSuite
    from .testing import eventually, make_claim

__all__ = [
    "EVERY_SECOND",
    "HISTORY_SLACK",
    "LEASE_MS",
    "AttemptTests",
    "AuditRefusalTests",
    "AuditTests",
    "BackendFactory",
    "BackendSuite",
    "BackfillRefusalTests",
    "BackfillTests",
    "ClaimTests",
    "Conformance",
    "ControlNotifyTests",
    "DecidedNotifyTests",
    "FleetTests",
    "GroupRefusalTests",
    "GroupTests",
    "GuaranteeReportTests",
    "HistoryLimitTests",
    "HistoryTests",
    "Instance",
    "LeaseTests",
    "LivenessTests",
    "NoGuaranteeReportTests",
    "OptionTests",
    "PauseRefusalTests",
    "PauseTests",
    "PlantForeignRecord",
    "PolicyTests",
    "ReferenceTests",
    "RegistryRefusalTests",
    "RegistryTests",
    "ReviveTests",
    "RobustnessTests",
    "ScheduleNotifyTests",
    "ScheduleStoreRefusalTests",
    "ScheduleStoreTests",
    "SchedulerRobustnessTests",
    "SchedulerTests",
    "StoredScheduleFleetTests",
    "SuiteBase",
    "TriggerRefusalTests",
    "TriggerTests",
    "eventually",
    "finished_run",
    "free_port",
    "gated",
    "make_claim",
    "make_job",
    "requires",
    "unique_name",
]

_HOME = {
    "SuiteBase": "_base",
    "AttemptTests": "_attempts",
    "AuditRefusalTests": "_audit",
    "AuditTests": "_audit",
    "BackfillTests": "_backfill",
    "BackfillRefusalTests": "_backfill",
    "ClaimTests": "_claim",
    "PauseRefusalTests": "_control",
    "PauseTests": "_control",
    "TriggerRefusalTests": "_control",
    "TriggerTests": "_control",
    "FleetTests": "_fleet_tests",
    "GroupRefusalTests": "_groups",
    "GroupTests": "_groups",
    "GuaranteeReportTests": "_guarantees",
    "NoGuaranteeReportTests": "_guarantees",
    "BackendFactory": "_harness",
    "Conformance": "_harness",
    "Instance": "_harness",
    "eventually": "testing",
    "make_claim": "testing",
    "HISTORY_SLACK": "_history",
    "HistoryTests": "_history",
    "EVERY_SECOND": "_jobs",
    "finished_run": "_jobs",
    "make_job": "_jobs",
    "unique_name": "_jobs",
    "LEASE_MS": "_lease",
    "LeaseTests": "_lease",
    "LivenessTests": "_liveness",
    "OptionTests": "_options",
    "PolicyTests": "_policies",
    "ReferenceTests": "_reference",
    "ReviveTests": "_revive",
    "RegistryRefusalTests": "_registry",
    "RegistryTests": "_registry",
    "ScheduleNotifyTests": "_schedule_notify",
    "ControlNotifyTests": "_control_notify",
    "DecidedNotifyTests": "_decided",
    "ScheduleStoreRefusalTests": "_schedules",
    "ScheduleStoreTests": "_schedules",
    "StoredScheduleFleetTests": "_schedules",
    "gated": "_requires",
    "free_port": "_ports",
    "requires": "_requires",
    "HistoryLimitTests": "_robust",
    "PlantForeignRecord": "_robust",
    "RobustnessTests": "_robust",
    "SchedulerRobustnessTests": "_robust",
    "SchedulerTests": "_scheduler",
    "BackendSuite": "_suite",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Not cached in this namespace: pytest's in-process runs (pytester) drop and
    # re-import the submodules, and a cached class would then mix two imports.
    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
