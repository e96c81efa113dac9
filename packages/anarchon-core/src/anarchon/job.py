"""A registered job: its name, schedule, function and resolved options."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .cron import Schedule
from .errors import InvalidJobError
from .options import JobOptions
from .run import datetime_to_ms, ms_to_datetime

__all__ = ["Job"]


def _is_async(func: Callable[..., Any]) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    # An object whose __call__ is a coroutine function is an async job too.
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)


def _takes_context(name: str, func: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # builtins without a signature: call them bare
        return False
    required = [
        p
        for p in sig.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    keyword_only = [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only:
        raise InvalidJobError(
            f"job {name!r}: its function {getattr(func, '__qualname__', func)!r} requires the keyword "
            f"argument(s) {', '.join(keyword_only)}, which no run passes; give them defaults, or bind them "
            "with functools.partial",
            option="func",
            value=func,
        )
    positional = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
    if len(required) > 1:
        raise InvalidJobError(
            f"job {name!r}: its function {getattr(func, '__qualname__', func)!r} requires "
            f"{len(required)} arguments; a job function takes no argument or one RunContext",
            option="func",
            value=func,
        )
    return bool(required) or (not positional and varargs)


@dataclass(frozen=True, eq=False)
class Job:
    """What ``Scheduler.add()`` returns and ``Scheduler.jobs`` holds."""

    name: str
    cron: str
    #: Called with no argument or with one :class:`~anarchon.context.RunContext`
    #: (see :data:`~anarchon.context.JobFunc`).
    func: Callable[..., Any]
    options: JobOptions = field(default_factory=JobOptions)
    schedule: Schedule = field(init=False, repr=False)
    is_async: bool = field(init=False, repr=False)
    takes_context: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise InvalidJobError(
                f"job {self.name!r}: {self.func!r} is not callable; pass a function", option="func", value=self.func
            )
        try:
            schedule = Schedule(self.cron, self.options.timezone, dst=self.options.dst, name=self.name)
        except ValueError as exc:
            raise InvalidJobError(f"job {self.name!r}: {exc}", option="cron", value=self.cron) from exc
        object.__setattr__(self, "schedule", schedule)
        object.__setattr__(self, "is_async", _is_async(self.func))
        object.__setattr__(self, "takes_context", _takes_context(self.name, self.func))

    @property
    def timezone(self) -> str:
        return self.options.timezone

    def next_slot_ms(self, after_ms: int) -> int | None:
        """The first slot strictly after ``after_ms``; None when the schedule has no more (an ``@at`` that passed)."""
        return self.schedule.next_or_none(after_ms)

    def next_slot(self, after_ms: int) -> datetime | None:
        """:meth:`next_slot_ms` as a UTC datetime."""
        slot = self.next_slot_ms(after_ms)
        return None if slot is None else ms_to_datetime(slot)

    def slots(self, after: datetime | None = None, count: int = 10) -> list[datetime]:
        """The next ``count`` slots strictly after ``after`` (now by default), in UTC.

        Fewer than ``count`` when the schedule reaches the end of the year 9999
        first (``0 0 29 2 *`` has 1,933 slots left after 2026), where Python's
        dates end.
        """
        start = datetime_to_ms(after) if after is not None else None
        return [ms_to_datetime(ms) for ms in self.schedule.slots(start, count)]

    @property
    def sub_minute(self) -> bool:
        """Whether two slots can be under a minute apart: only a seconds field or an ``@every`` allows it."""
        return len(self.cron.split()) >= 6 or self.schedule.fixed

    def shortest_interval_ms(self, probe: int = 64) -> int | None:
        """The shortest gap between two of the job's next ``probe`` slots (``None``: fewer than two)."""
        upcoming = self.schedule.slots(None, probe)
        gaps = [b - a for a, b in itertools.pairwise(upcoming)]
        return min(gaps) if gaps else None

    def fit_jitter(self, explicit: bool) -> Job:
        """Jitter that cannot reorder the job's slots.

        A claim delayed by more than the gap to the next slot would come after
        that slot's claim and lose by the mark rule. The default jitter is
        therefore at most a quarter of the shortest gap; an explicit one must
        be shorter than the gap. Only a schedule with a seconds field or an
        ``@every`` can have gaps under a minute, so a five-field one is probed
        only when an explicit jitter reaches a minute.
        """
        jitter = self.options.jitter_ms
        if not jitter or not (self.sub_minute or (explicit and jitter >= 60_000)):
            return self
        shortest = self.shortest_interval_ms()
        if shortest is None:
            return self
        if explicit:
            if jitter >= shortest:
                raise InvalidJobError(
                    f"job {self.name!r}: jitter_ms={jitter} is not shorter than the {shortest} ms between two "
                    f"of its slots ({self.cron!r}), so a slot's claim could come after the next slot's and lose "
                    f"it; set jitter_ms below {shortest} (a quarter, {shortest // 4}, spreads claims safely) "
                    "or leave it unset for that default",
                    option="jitter_ms",
                    value=jitter,
                )
            return self
        fitted = min(jitter, shortest // 4)
        if fitted == jitter:
            return self
        return dataclasses.replace(self, options=dataclasses.replace(self.options, jitter_ms=fitted))
