"""The whole suite, as one class a backend's test module subclasses."""

from __future__ import annotations

from ._attempts import AttemptTests
from ._audit import AuditRefusalTests, AuditTests
from ._backfill import BackfillRefusalTests, BackfillTests
from ._claim import ClaimTests
from ._control import PauseRefusalTests, PauseTests, TriggerRefusalTests, TriggerTests
from ._control_notify import ControlNotifyTests
from ._decided import DecidedNotifyTests
from ._groups import GroupRefusalTests, GroupTests
from ._guarantees import GuaranteeReportTests, NoGuaranteeReportTests
from ._history import HistoryTests
from ._lease import LeaseTests
from ._liveness import LivenessTests
from ._options import OptionTests
from ._policies import PolicyTests
from ._reference import ReferenceTests
from ._registry import RegistryRefusalTests, RegistryTests
from ._revive import ReviveTests
from ._robust import RobustnessTests, SchedulerRobustnessTests
from ._schedule_notify import ScheduleNotifyTests
from ._scheduler import SchedulerTests
from ._schedules import ScheduleStoreRefusalTests, ScheduleStoreTests, StoredScheduleFleetTests

__all__ = ["BackendSuite"]


class BackendSuite(
    ClaimTests,
    HistoryTests,
    OptionTests,
    LeaseTests,
    AttemptTests,
    LivenessTests,
    PolicyTests,
    ReferenceTests,
    SchedulerTests,
    RobustnessTests,
    SchedulerRobustnessTests,
    BackfillTests,
    BackfillRefusalTests,
    ReviveTests,
    PauseTests,
    PauseRefusalTests,
    TriggerTests,
    TriggerRefusalTests,
    RegistryTests,
    RegistryRefusalTests,
    ScheduleStoreTests,
    StoredScheduleFleetTests,
    ScheduleStoreRefusalTests,
    ScheduleNotifyTests,
    DecidedNotifyTests,
    ControlNotifyTests,
    GuaranteeReportTests,
    NoGuaranteeReportTests,
    AuditTests,
    AuditRefusalTests,
    GroupTests,
    GroupRefusalTests,
):
    """Every conformance test; each gated on the capabilities it needs.

    Subclass it, name the subclass ``Test…`` and override ``backend_factory``.
    To run only some parts, subclass the mixins you want instead.
    """
