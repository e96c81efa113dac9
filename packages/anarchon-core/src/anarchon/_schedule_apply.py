"""``anarchon schedules apply FILE``: make the stored schedules what a file in git says.

The file (TOML, or YAML with PyYAML installed) has one table per schedule,
named by the schedule: ``task``, one of ``cron``, ``every`` (an interval,
``"90s"``) or ``at`` (one ISO time), and optionally ``timezone``, ``kwargs``
and ``options``. Every entry is checked before anything is
written: one bad entry changes nothing and is named. The plan (added,
changed field by field, removed with ``prune``) is computed against what is
stored, then made one schedule at a time, each against the revision it was
planned from, so a change someone makes meanwhile stops the run with a
conflict instead of being overwritten. Schedules written here are marked
``origin="apply"``; ``prune`` removes only those, never one added by hand or
through the API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._schedule_admin import Schedules
from .errors import InvalidJobError
from .schedules import ScheduleChange, StoredSchedule, check_schedule, schedule_text

__all__ = ["Plan", "apply_plan", "load_file", "plan"]

_FIELDS = ("task", "cron", "every", "at", "timezone", "kwargs", "options")


def _parse(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            raise InvalidJobError(f"{path}: reading YAML needs PyYAML: pip install pyyaml (or write TOML)") from None
        try:
            return yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise InvalidJobError(f"{path} is not valid YAML: {exc}") from None
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidJobError(f"{path} is not valid TOML: {exc}") from None


def load_file(path: Path, schedules: Schedules) -> dict[str, StoredSchedule]:
    """Every entry of the file as a checked schedule; the first bad one raises, naming it."""
    data = _parse(path)
    if not isinstance(data, Mapping):
        raise InvalidJobError(f"{path}: expected one table per schedule, named by the schedule, found {type(data)}")
    out: dict[str, StoredSchedule] = {}
    for name, entry in data.items():
        where = f"{path}: schedule {name!r}"
        if not isinstance(entry, Mapping):
            raise InvalidJobError(f"{where} must be a table of {', '.join(_FIELDS)}")
        unknown = sorted(set(entry) - set(_FIELDS))
        if unknown:
            raise InvalidJobError(
                f"{where}: unknown field(s) {', '.join(unknown)}; a schedule has {', '.join(_FIELDS)}"
            )
        options = dict(entry.get("options") or {})
        if entry.get("timezone") is not None:
            options["timezone"] = entry["timezone"]
        try:
            task = entry.get("task")
            cron = schedule_text(cron=entry.get("cron"), every=entry.get("every"), at=entry.get("at"))
            schedule = StoredSchedule(str(name), str(task or ""), cron, entry.get("kwargs") or {}, options, "apply")
            check_schedule(schedules.backend, schedule)
        except InvalidJobError as exc:
            raise InvalidJobError(f"{where}: {exc}; nothing was changed", option=exc.option, value=exc.value) from None
        out[schedule.name] = schedule
    return out


@dataclass
class Plan:
    """What ``apply`` does: schedules to add, to change (with their field-by-field diff), to remove."""

    add: list[StoredSchedule] = field(default_factory=list)
    change: list[tuple[StoredSchedule, StoredSchedule, dict[str, Any]]] = field(default_factory=list)
    remove: list[StoredSchedule] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.add or self.change or self.remove)

    def lines(self) -> list[str]:
        out = [f"+ {s.name}: task={s.task} cron={s.cron!r} timezone={s.timezone}" for s in self.add]
        for before, _, diff in self.change:
            out.append(f"~ {before.name} (revision {before.revision}):")
            out += [f"    {key}: {json.dumps(old)} -> {json.dumps(new)}" for key, (old, new) in diff.items()]
        out += [f"- {s.name} (revision {s.revision})" for s in self.remove]
        return out or ["no change"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "add": [s.to_dict() for s in self.add],
            "change": [{"name": b.name, "revision": b.revision, "changes": d} for b, _, d in self.change],
            "remove": [{"name": s.name, "revision": s.revision} for s in self.remove],
        }


def plan(wanted: Mapping[str, StoredSchedule], stored: list[StoredSchedule], *, prune: bool) -> Plan:
    held = {s.name: s for s in stored}
    out = Plan()
    for name, schedule in sorted(wanted.items()):
        before = held.get(name)
        if before is None:
            out.add.append(schedule)
            continue
        diff = ScheduleChange.between(before, schedule)
        if before.origin != "apply":
            diff["origin"] = [before.origin, "apply"]
        if diff:
            out.change.append((before, schedule, diff))
    if prune:
        out.remove = [s for n, s in sorted(held.items()) if n not in wanted and s.origin == "apply"]
    return out


async def apply_plan(schedules: Schedules, todo: Plan, *, reason: str | None = None) -> int:
    """Make the plan, each change against the revision it was planned from; the number of changes made."""
    done = 0
    why = reason or "anarchon schedules apply"
    for s in todo.add:
        await schedules.add(
            s.name, task=s.task, cron=s.cron, kwargs=s.kwargs, options=s.options, origin="apply", reason=why, force=True
        )
        done += 1
    for before, after, _ in todo.change:
        unset: dict[str, Any] = {k: None for k in before.options if k not in after.options}
        await schedules.set(
            after.name, task=after.task, cron=after.cron, kwargs=after.kwargs, options={**unset, **after.options},
            origin="apply", if_revision=before.revision, reason=why, force=True,
        )  # fmt: skip
        done += 1
    for s in todo.remove:
        await schedules.remove(s.name, if_revision=s.revision, reason=why)
        done += 1
    return done
