"""The dashboard's settings, checked once when the app is built."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Settings"]


def _bounded(option: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"anarchon_web.app({option}={value!r}): use an integer from {low} to {high}")
    return value


@dataclass(frozen=True)
class Settings:
    """What a dashboard shows and allows.

    ``actions`` turns on the steering forms (pause, resume, trigger, backfill,
    run now, stored schedules); ``app()`` allows it only with sign-in
    (``sign_in``), so a dashboard nobody signs in to is read-only.
    ``local_runs``: this process has the jobs' functions (module:attr), so
    it can run them itself (run now, backfill).
    """

    title: str = "anarchon"
    #: Jobs per page of the jobs page (each row costs one history call).
    per_page: int = 50
    #: Slots in each job's strip on the jobs page.
    strip_slots: int = 30
    #: Slots in the job page's timeline.
    timeline_slots: int = 60
    #: Records read for the job page (history keeps about ``history_size``, 1000 by default).
    history_limit: int = 1000
    actions: bool = False
    sign_in: bool = False
    local_runs: bool = False
    #: Seconds between the live refreshes of the jobs and job pages (``static/live.js``); 0 turns them off.
    refresh_s: int = 5

    def __post_init__(self) -> None:
        if not isinstance(self.title, str) or not self.title.strip():
            raise ValueError(f"anarchon_web.app(title={self.title!r}): give a non-empty string")
        _bounded("per_page", self.per_page, 1, 500)
        _bounded("strip_slots", self.strip_slots, 1, 500)
        _bounded("timeline_slots", self.timeline_slots, 1, 1000)
        _bounded("history_limit", self.history_limit, 1, 100_000)
        _bounded("refresh_s", self.refresh_s, 0, 3600)
        if not isinstance(self.actions, bool):
            raise ValueError(f"anarchon_web.app(actions={self.actions!r}): use True or False")
