"""The fleet's ledger, read back and judged: slots, runs, duplicates, missed slots, take-overs.

:func:`reconcile` turns the lines the instances wrote (see
:mod:`anarchon_conformance.instance`) and the slots the cron says were due
into a :class:`FleetReport`.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "RE_RUN_EDGE",
    "FleetReport",
    "SlotRow",
    "TakeOver",
    "assert_every_slot_once",
    "grant_of",
    "iter_rows",
    "most_at_once",
    "read_ledger",
    "reconcile",
]


def most_at_once(spans: Iterable[tuple[float, float]]) -> int:
    """The most of these (start, end) spans open at one instant: runs going at once, from their own stamps.

    An end and a start at the same instant count the end first (the place was freed, then taken).
    """
    edges = sorted(edge for start, end in spans for edge in ((start, 1), (end, -1)))
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def read_ledger(path: Path) -> list[dict[str, Any]]:
    """Every whole line of the ledger.

    Instances append while the test reads (``Fleet.wait_for`` polls it every
    50 ms): a read can end inside a line still being written, so the piece
    after the last newline is left for the next read, never parsed.
    """
    if not path.exists():
        return []
    *whole, _partial = path.read_text().split("\n")
    return [json.loads(line) for line in whole if line.strip()]


@dataclass(frozen=True)
class SlotRow:
    """What happened to one slot of one job, for the per-slot table."""

    job: str
    slot_ms: int
    runs: tuple[tuple[str, int, str], ...]  # (instance, attempt, "succeeded" | "died" | RE_RUN_EDGE)
    skipped: bool

    @property
    def outcome(self) -> str:
        if self.skipped and not self.runs:
            return "skipped (overlap)"
        if not self.runs:
            return "MISSED"
        finished = [r for r in self.runs if r[2] == "succeeded"]
        if len(finished) > 1:
            return "DUPLICATE"
        if any(r[2] == RE_RUN_EDGE for r in self.runs):
            return "re-run"
        return "taken over" if len(self.runs) > 1 else "ran once"


@dataclass
class FleetReport:
    slots: int = 0
    runs: int = 0
    duplicates: int = 0
    missed: int = 0
    skipped: int = 0
    #: Slots nobody ran that a later run of the job covered (its ``missed`` counts them: a dead
    #: run superseded by the next slot, or a catch-up), as the lease rules allow.
    covered: int = 0
    take_overs: int = 0
    take_over_ms: list[int] = field(default_factory=list)
    #: Slots run again by a take-over after their killed runner had ended the job but died before
    #: the backend recorded it: the at-least-once edge the lease rules allow (jobs should be idempotent).
    re_runs: int = 0
    re_run_slots: list[tuple[str, int]] = field(default_factory=list)
    rows: list[SlotRow] = field(default_factory=list)
    duplicate_slots: list[tuple[str, int]] = field(default_factory=list)
    missed_slots: list[tuple[str, int]] = field(default_factory=list)

    def summary(self) -> str:
        took = f" (took {', '.join(f'{ms} ms' for ms in self.take_over_ms)})" if self.take_over_ms else ""
        return (
            f"slots: {self.slots}, runs: {self.runs}, duplicates: {self.duplicates}, "
            f"missed: {self.missed}, skipped (overlap): {self.skipped}, covered: {self.covered}, "
            f"take-overs: {self.take_overs}{took}, re-runs (died before the record): {self.re_runs}"
        )


def assert_every_slot_once(report: FleetReport, *, min_slots: int) -> None:
    """The promise of every backend while all instances live: each slot run exactly once."""
    assert report.slots >= min_slots, f"only {report.slots} slots in the window, expected {min_slots}"
    assert report.duplicates == 0, f"slots run twice: {report.duplicate_slots}"
    assert report.missed == 0, f"slots nobody ran: {report.missed_slots}"
    assert report.runs + report.skipped == report.slots, report.summary()


@dataclass(frozen=True)
class TakeOver:
    """A run whose instance was killed, and the later attempt that took it over."""

    first: dict[str, Any]
    second: dict[str, Any]
    killed_at: int

    @property
    def took_ms(self) -> int:
        return int(self.second["t"]) - self.killed_at


#: One grant of a slot: instance, attempt and fencing token (see :func:`grant_of`).
GrantKey = tuple[str, int, int | None]

#: A run whose job ended on an instance that was killed before the backend recorded the end,
#: and that a later attempt ran again (the row's status for it).
RE_RUN_EDGE = "ended, killed before its record"


def _re_run_edges(
    starts: list[dict[str, Any]], ends: list[dict[str, Any]], recorded: set[GrantKey], killed: set[str]
) -> set[GrantKey]:
    """The ended runs of one slot that a later attempt may run again without a duplicate.

    The job ended (``end``), the backend never answered its finish (no ``recorded``), its
    instance was killed, and a higher attempt started after the end: the backend could not tell
    a finished job from a dead one. Anything else that ends twice is a duplicate.
    """
    edges: set[GrantKey] = set()
    for end in ends:
        run = grant_of(end)
        if run in recorded or end["instance"] not in killed:
            continue
        if any(s["attempt"] > end["attempt"] and s["t"] >= end["t"] for s in starts):
            edges.add(run)
    return edges


def _status(run: GrantKey, ended: set[GrantKey], edges: set[GrantKey]) -> str:
    return RE_RUN_EDGE if run in edges else "succeeded" if run in ended else "died"


def grant_of(start: dict[str, Any]) -> GrantKey:
    """The grant a ``start`` line ran under: a run handed over goes on as the same attempt
    on another instance, so only instance, attempt and fencing token together tell one grant."""
    return (start["instance"], start["attempt"], start.get("fencing"))


def reconcile(
    ledger: Sequence[dict[str, Any]],
    expected: dict[str, list[int]],
    killed_at: dict[str, int] | None = None,
) -> FleetReport:
    """Judge the ledger against the slots each job should have run.

    A *duplicate* is a slot run to its end more than once, or started twice
    under one grant (instance, attempt and fencing token; a run handed over on
    stop goes on as the same attempt elsewhere), except a *re-run*: a take-over of a run
    whose killed runner ended the job before the backend recorded it (docs/concepts.md: a lease
    backend may run a slot again after a runner dies; see :func:`_re_run_edges`); a
    *take-over* is a slot whose later attempt
    started after an earlier one died; a slot is *missed* when nothing ran it,
    no instance recorded it as skipped for overlap, and no later run of the job
    covers it (its ``missed`` count reaches back over the slot). ``killed_at`` maps an
    instance to when it was killed, to time each take-over from the kill.
    """
    starts: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    ends: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    skips: set[tuple[str, int]] = set()
    recorded: dict[tuple[str, int], set[GrantKey]] = defaultdict(set)
    for rec in ledger:
        key = (rec["job"], rec["slot"]) if "job" in rec else None
        if key is None:
            continue
        if rec["e"] == "start":
            starts[key].append(rec)
        elif rec["e"] == "end":
            ends[key].append(rec)
        elif rec["e"] == "recorded":
            recorded[key].add(grant_of(rec))
        elif rec["e"] == "skip" and rec.get("reason") == "overlap":
            skips.add(key)
    report = FleetReport()
    killed_at = killed_at or {}
    covered: set[tuple[str, int]] = set()
    for job, slots in expected.items():
        index = {slot: i for i, slot in enumerate(slots)}
        for (name, slot), recs in starts.items():
            if name != job or slot not in index:
                continue
            reach = max(int(r.get("missed") or 0) for r in recs) - 1
            if reach > 0:
                covered.update((job, earlier) for earlier in slots[max(0, index[slot] - reach) : index[slot]])
    for job, slots in sorted(expected.items()):
        for slot in slots:
            key = (job, slot)
            report.slots += 1
            s, e = starts.get(key, []), ends.get(key, [])
            edges = _re_run_edges(s, e, recorded.get(key, set()), set(killed_at))
            ended = {grant_of(r) for r in e}
            runs = tuple(
                (r["instance"], r["attempt"], _status(grant_of(r), ended, edges))
                for r in sorted(s, key=lambda r: (r["attempt"], r["t"]))
            )
            grants = [grant_of(r) for r in s]
            if len(e) - len(edges) > 1 or len(grants) != len(set(grants)):
                report.duplicates += 1
                report.duplicate_slots.append(key)
            elif edges:
                report.re_runs += 1
                report.re_run_slots.append(key)
            if not s and key not in skips and key not in covered:
                report.missed += 1
                report.missed_slots.append(key)
            if not s and key in skips:
                report.skipped += 1
            elif not s and key in covered:
                report.covered += 1
            report.runs += len(e)
            by_time = sorted(s, key=lambda r: r["t"])
            for first, later in itertools.pairwise(by_time):
                if later["attempt"] > first["attempt"]:
                    report.take_overs += 1
                    report.take_over_ms.append(later["t"] - killed_at.get(first["instance"], first["t"]))
            report.rows.append(SlotRow(job, slot, runs, key in skips))
    return report


def iter_rows(report: FleetReport) -> Iterator[list[str]]:
    """Rows for a per-slot table: job, slot time, who ran it, outcome."""
    for row in report.rows:
        when = time.strftime("%H:%M:%S", time.gmtime(row.slot_ms / 1000))
        who = ", ".join(f"{i} (attempt {a}{'' if s == 'succeeded' else ', ' + s})" for i, a, s in row.runs) or "-"
        yield [row.job, when, who, row.outcome]
