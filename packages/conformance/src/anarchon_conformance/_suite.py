"""The whole suite, as one class a backend's test module subclasses."""

from __future__ import annotations

from ._claim import ClaimTests
from ._history import HistoryTests
from ._lease import LeaseTests
from ._options import OptionTests
from ._policies import PolicyTests
from ._reference import ReferenceTests
from ._robust import RobustnessTests, SchedulerRobustnessTests
from ._scheduler import SchedulerTests

__all__ = ["BackendSuite"]


class BackendSuite(
    ClaimTests,
    HistoryTests,
    OptionTests,
    LeaseTests,
    PolicyTests,
    ReferenceTests,
    SchedulerTests,
    RobustnessTests,
    SchedulerRobustnessTests,
):
    """Every conformance test; each gated on the capabilities it needs.

    Subclass it, name the subclass ``Test…`` and override ``backend_factory``.
    To run only some parts, subclass the mixins you want instead.
    """
