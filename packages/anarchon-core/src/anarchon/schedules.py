"""Stored schedules: jobs kept in the backend, added, changed and removed at runtime.

A code job exists because every instance's code adds it; a stored schedule
exists because the backend holds it (capability ``schedules``). It names a
*task*, a callable each instance registers with ``Scheduler.task()``, and
carries a cron, a time zone, keyword arguments (JSON) and any job option.
Every instance that has the task runs it as a job of the schedule's name:
one run per slot across the fleet, pause, trigger, history and the views
included. An instance without the task never claims its slots.

Each change is one atomic write of the whole record, checked against the
revision the writer read (``if_revision``), so two operators never lose each
other's changes silently; every change is logged with who, when, what and
why. Instances read the backend's change counter every
:data:`POLL_MS` and only what changed after the revision they hold, so a
change costs the referee one write and each instance one small read. Where
the backend notifies changes (capability ``schedule_notify``), a change
wakes every instance at once and the counter is read every
:data:`NOTIFIED_POLL_MS` only, to catch a notification lost on the way.

This module is the record and its checks; :class:`~anarchon.Schedules` (in
``anarchon._schedule_admin``) changes them, ``anarchon._storedwatch`` runs them.
``Schedules`` and ``SyncSchedules`` are re-exported here for convenience.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._build import build_job
from ._identity import default_actor
from .backend import Backend
from .cron import Schedule
from .errors import InvalidJobError
from .options import check_job_name

__all__ = [
    "FORGET_AFTER_MS",
    "LOG_KEEP",
    "NOTIFIED_POLL_MS",
    "POLL_MS",
    "REUSE_AFTER_MS",
    "TOMBSTONE_MS",
    "ScheduleChange",
    "StoredSchedule",
    "check_kwargs",
    "check_not_passed",
    "check_schedule",
    "default_actor",
    "schedule_text",
]

#: How often each instance reads the backend's schedule counter (one small read).
POLL_MS = 1000
#: The same while the backend's notification of changes is live (capability ``schedule_notify``): a
#: change wakes every instance at once, so this poll only catches a notification lost on the way.
NOTIFIED_POLL_MS = 10_000
#: How long a removed schedule's tombstone (and its change log) is kept; an instance that could
#: not read the backend for longer than half of it reads every schedule again.
TOMBSTONE_MS = 24 * 3600 * 1000
#: When a removed schedule is forgotten (its tombstone, log, job state and run history dropped, by the
#: first change made after it): an instance that has not read the counter for half the tombstone's
#: life reads every schedule again, so no instance needs a tombstone older than this.
FORGET_AFTER_MS = TOMBSTONE_MS // 2
#: A slot of a removed schedule's name claimed this long after the removal means the name is in use
#: again (a code job, a new schedule), so its state stays when the tombstone goes; claims within it
#: are the removed schedule's own, by instances that had not yet seen the removal.
REUSE_AFTER_MS = 3600 * 1000
#: How many changes of one schedule its log keeps.
LOG_KEEP = 100
#: Format of the stored texts; a reader reports and skips records of another format.
FORMAT = 1
#: Where a schedule came from: ``apply`` may prune only what ``apply`` wrote.
ORIGINS = ("api", "apply")


def _nothing() -> None:
    """The function a schedule is checked with: only the cron and options matter."""


def check_kwargs(name: str, kwargs: object) -> dict[str, Any]:
    """A schedule's keyword arguments: a JSON object with string keys, nothing JSON cannot hold."""
    if not isinstance(kwargs, Mapping):
        raise InvalidJobError(
            f"schedule {name!r}: kwargs={kwargs!r} must be a JSON object of keyword arguments, "
            'for example {"tenant": 42}',
            option="kwargs",
            value=kwargs,
        )
    for key in kwargs:
        if not isinstance(key, str) or not key.isidentifier():
            raise InvalidJobError(
                f"schedule {name!r}: kwargs key {key!r} is not a Python identifier, so no task can take it "
                "as a keyword argument; rename it",
                option="kwargs",
                value=key,
            )
    try:
        text = json.dumps(dict(kwargs), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidJobError(
            f"schedule {name!r}: kwargs hold a value JSON cannot store ({exc}); use strings, numbers, "
            "booleans, null, lists and objects",
            option="kwargs",
            value=kwargs,
        ) from None
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def schedule_text(*, cron: str | None = None, every: str | None = None, at: str | None = None) -> str:
    """The schedule a stored record keeps, from exactly one of a cron, an interval or one time.

    ``every="90s"`` is ``"@every 90s"`` and ``at="2026-12-24T18:00:00+01:00"``
    is ``"@at …"`` (:mod:`anarchon.cron.fixed`), so every reader of a cron
    reads them alike and the backends store them as any cron.
    """
    given = {k: v for k, v in (("cron", cron), ("every", every), ("at", at)) if v is not None}
    if len(given) != 1:
        named = ", ".join(given) or "none"
        raise InvalidJobError(
            f"a schedule takes exactly one of cron, every or at ({named} given); e.g. cron='0 2 * * *', "
            "every='90s' or at='2026-12-24T18:00:00+01:00'",
            option="cron",
            value=given or None,
        )
    ((key, value),) = given.items()
    if not isinstance(value, str):
        raise InvalidJobError(f"{key}={value!r} must be a string", option=key, value=value)
    return value if key == "cron" else f"@{key} {value.strip()}"


def check_not_passed(schedule: StoredSchedule, now_ms: int) -> None:
    """Refuse a one-time (``@at``) schedule whose time has passed: it would never run."""
    if schedule.next_slot_ms(now_ms) is None:
        raise InvalidJobError(
            f"schedule {schedule.name!r}: {schedule.cron!r} has no slot after now, so it would never run; "
            "give a time in the future",
            option="at",
            value=schedule.cron,
        )


@dataclass(frozen=True)
class StoredSchedule:
    """One stored schedule as the backend holds it (``revision`` 0: not stored yet)."""

    name: str
    task: str
    cron: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: Job options as given (``timezone`` among them), each checked as ``add()`` checks it.
    options: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "api"
    revision: int = 0
    updated_ms: int = 0
    updated_by: str = ""

    @property
    def timezone(self) -> str:
        return str(self.options.get("timezone", "UTC"))

    def next_slot_ms(self, after_ms: int) -> int | None:
        """The first slot after ``after_ms``; None when there is none (an ``@at`` that passed) or it cannot be read."""
        try:
            schedule = Schedule(self.cron, self.timezone, dst=self.options.get("dst", "cron"), name=self.name)
        except (ValueError, TypeError):
            return None
        return schedule.next_or_none(after_ms)

    def fields(self) -> dict[str, Any]:
        """What a change compares: the fields that decide how and when the schedule runs."""
        return {"task": self.task, "cron": self.cron, "kwargs": dict(self.kwargs), "options": dict(self.options)}

    def record(self) -> str:
        """The text the backend stores (the revision is the backend's, not in the text)."""
        data = {
            "format": FORMAT,
            **self.fields(),
            "origin": self.origin,
            "updated_ms": self.updated_ms,
            "updated_by": self.updated_by,
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, name: str, record: str, revision: int) -> StoredSchedule:
        """The schedule a stored text holds; ``ValueError`` saying why when it holds none."""
        data = json.loads(record)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a stored schedule of format {FORMAT}")
        kwargs, options = data.get("kwargs", {}), data.get("options", {})
        if not isinstance(kwargs, dict) or not isinstance(options, dict):
            raise ValueError("kwargs and options must be objects")
        return cls(
            name,
            str(data["task"]),
            str(data["cron"]),
            kwargs,
            options,
            str(data.get("origin", "api")),
            revision,
            int(data.get("updated_ms", 0)),
            str(data.get("updated_by", "")),
        )

    def to_dict(self) -> dict[str, Any]:
        """For ``--json`` and the web: every field, the time zone spelled out."""
        return {
            "name": self.name,
            **self.fields(),
            "timezone": self.timezone,
            "origin": self.origin,
            "revision": self.revision,
            "updated_ms": self.updated_ms,
            "updated_by": self.updated_by,
        }


def check_schedule(backend: Backend, schedule: StoredSchedule) -> None:
    """Check a schedule exactly as ``add()`` checks a job on this backend; raise before anything is stored."""
    check_job_name(schedule.name)
    if not isinstance(schedule.task, str) or not schedule.task.strip():
        raise InvalidJobError(
            f"schedule {schedule.name!r}: task={schedule.task!r} must name a task an instance registered "
            "with scheduler.task(fn, name=...)",
            option="task",
            value=schedule.task,
        )
    if schedule.origin not in ORIGINS:
        raise InvalidJobError(
            f"schedule {schedule.name!r}: origin={schedule.origin!r} must be one of {', '.join(ORIGINS)}",
            option="origin",
            value=schedule.origin,
        )
    check_kwargs(schedule.name, schedule.kwargs)
    if schedule.options.get("every_instance") is True:
        raise InvalidJobError(
            f"schedule {schedule.name!r}: every_instance=True is for jobs added in code (each instance adds its "
            "own copy); a stored schedule runs once per slot across the fleet: remove every_instance",
            option="every_instance",
            value=True,
        )
    for option, value in schedule.options.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidJobError(
                f"schedule {schedule.name!r}: option {option}={value!r} is not a finite number",
                option=option,
                value=value,
            )
    try:
        json.dumps(dict(schedule.options), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidJobError(
            f"schedule {schedule.name!r}: an option holds a value JSON cannot store ({exc}); a stored schedule "
            "takes options that are strings, numbers, booleans or null",
            option="options",
            value=dict(schedule.options),
        ) from None
    try:
        build_job(backend, schedule.name, schedule.cron, _nothing, **schedule.options)
    except TypeError as exc:  # an unknown option, as a wrong keyword to add() would be
        raise InvalidJobError(
            f"schedule {schedule.name!r}: {exc}", option="options", value=dict(schedule.options)
        ) from None


@dataclass(frozen=True)
class ScheduleChange:
    """One entry of a schedule's change log: what changed, when, by whom and why."""

    revision: int
    op: str  # "add", "set" or "remove"
    at_ms: int
    by: str
    reason: str | None = None
    #: field -> [before, after]; ``None`` before on an add, after on a removal.
    changes: Mapping[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        data = {"op": self.op, "at_ms": self.at_ms, "by": self.by, "reason": self.reason, "changes": self.changes}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, revision: int, text: str) -> ScheduleChange:
        data = json.loads(text)
        return cls(
            revision,
            str(data["op"]),
            int(data["at_ms"]),
            str(data["by"]),
            data.get("reason"),
            data.get("changes") or {},
        )

    @staticmethod
    def between(before: StoredSchedule | None, after: StoredSchedule | None) -> dict[str, Any]:
        """Field by field, what differs between two versions (option by option for ``options``)."""
        old = before.fields() if before is not None else {}
        new = after.fields() if after is not None else {}
        diff: dict[str, Any] = {}
        for key in ("task", "cron", "kwargs"):
            if old.get(key) != new.get(key):
                diff[key] = [old.get(key), new.get(key)]
        old_options, new_options = old.get("options", {}), new.get("options", {})
        for option in sorted(set(old_options) | set(new_options)):
            if old_options.get(option) != new_options.get(option):
                diff[f"options.{option}"] = [old_options.get(option), new_options.get(option)]
        return diff
