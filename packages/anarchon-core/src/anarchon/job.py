"""A registered job: its name, schedule, function and resolved options."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .cron import Schedule
from .errors import InvalidJobError
from .options import JobOptions
from .run import RunContext, datetime_to_ms, ms_to_datetime

__all__ = ["Job", "JobFunc"]

JobFunc = (
    Callable[[], Any]
    | Callable[[RunContext], Any]
    | Callable[[], Awaitable[Any]]
    | Callable[[RunContext], Awaitable[Any]]
)


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
    func: JobFunc
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
            schedule = Schedule(self.cron, self.options.timezone)
        except ValueError as exc:
            raise InvalidJobError(f"job {self.name!r}: {exc}", option="cron", value=self.cron) from exc
        object.__setattr__(self, "schedule", schedule)
        object.__setattr__(self, "is_async", _is_async(self.func))
        object.__setattr__(self, "takes_context", _takes_context(self.name, self.func))

    @property
    def timezone(self) -> str:
        return self.options.timezone

    def next_slot_ms(self, after_ms: int) -> int:
        return self.schedule.next_after(after_ms)

    def slots(self, after: datetime | None = None, count: int = 10) -> list[datetime]:
        """The next ``count`` slots strictly after ``after`` (now by default), in UTC."""
        start = datetime_to_ms(after) if after is not None else None
        return [ms_to_datetime(ms) for ms in self.schedule.slots(start, count)]
