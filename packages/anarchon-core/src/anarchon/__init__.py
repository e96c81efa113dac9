"""anarchon: distributed cron for Python.

Every instance of an application runs the same :class:`Scheduler`; for each
scheduled time of a job exactly one instance runs it, refereed by a backend
the team already operates. Backend classes of other distributions resolve
lazily (``from anarchon import RedisBackend``), so importing anarchon never
imports a client library it does not need; they are not in ``__all__``, so a
star import never asks for a backend that is not installed. For type checkers,
import them from their own package (``from anarchon_redis import RedisBackend``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

from ._build import build_job
from ._group_admin import Groups, SyncGroups
from ._schedule_admin import Schedules, SyncSchedules
from ._steer import TriggerTimeoutError
from .audit import AuditEntry, read_audit
from .backend import Backend, LeaseBackend
from .backfill import BackfillSummary
from .background import SchedulerThread, start_in_background
from .capabilities import Capabilities
from .claims import Claim, ClaimResult, Grant, Outcome
from .clock import Clock, LoopClock, SkewedClock, SystemClock
from .context import JobFunc, RunContext
from .control import PauseState, RunRequest
from .distributions import FIRST_PARTY, install_hint
from .errors import (
    AnarchonDeprecationWarning,
    AnarchonError,
    BackendNotInstalledError,
    BackendUnavailableError,
    BackfillError,
    InstanceIdInUseError,
    InvalidJobError,
    JobNotFoundError,
    ScheduleConflictError,
    UnsupportedOperationError,
    UnsupportedOptionError,
)
from .groups import GroupState
from .hookspecs import hookimpl
from .job import Job
from .liveness import Beat, Heart
from .memory import MemoryBackend, MemoryStore
from .options import JobOptions
from .run import Attempt, Run, RunId, RunStatus
from .scheduler import Scheduler
from .schedules import ScheduleChange, StoredSchedule

try:
    __version__ = importlib.metadata.version("anarchon-core")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "AnarchonDeprecationWarning",
    "AnarchonError",
    "Attempt",
    "AuditEntry",
    "Backend",
    "BackendNotInstalledError",
    "BackendUnavailableError",
    "BackfillError",
    "BackfillSummary",
    "Beat",
    "Capabilities",
    "Claim",
    "ClaimResult",
    "Clock",
    "Grant",
    "GroupState",
    "Groups",
    "Heart",
    "InstanceIdInUseError",
    "InvalidJobError",
    "Job",
    "JobFunc",
    "JobNotFoundError",
    "JobOptions",
    "LeaseBackend",
    "LoopClock",
    "MemoryBackend",
    "MemoryStore",
    "Outcome",
    "PauseState",
    "Run",
    "RunContext",
    "RunId",
    "RunRequest",
    "RunStatus",
    "ScheduleChange",
    "ScheduleConflictError",
    "Scheduler",
    "SchedulerThread",
    "Schedules",
    "SkewedClock",
    "StoredSchedule",
    "SyncGroups",
    "SyncSchedules",
    "SystemClock",
    "TriggerTimeoutError",
    "UnsupportedOperationError",
    "UnsupportedOptionError",
    "build_job",
    "hookimpl",
    "read_audit",
    "start_in_background",
]


def __getattr__(name: str) -> Any:
    try:
        module, distribution = FIRST_PARTY[name]
    except KeyError:
        raise AttributeError(f"module 'anarchon' has no attribute {name!r}") from None
    try:
        package = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module:
            raise  # the backend is installed but one of its own dependencies is not
        raise BackendNotInstalledError(
            f"{name} lives in the {distribution} distribution, which is not installed: {install_hint(distribution)}"
        ) from exc
    return getattr(package, name)
