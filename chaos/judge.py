"""The verdict on one scenario: the ledger and the backend's history against the promises.

Definitions (the report's glossary repeats them):

duplicate
    Two runs of one slot that executed at the same time (their intervals from
    ``start`` to ``end``/``cancel``/death overlap), or two starts with the same
    fencing token (one grant run twice), or — on a claim backend, which has no
    attempt 2 — any second start. (Two starts may share an attempt: a run
    handed over goes on as the same attempt on another instance.)
    A duplicate anywhere breaks the promise.
re-run
    Lease backends only: a later attempt that started after the earlier one had
    *ended* its function, because the earlier runner lost its lease before it
    could record the end (cut off, killed). This is the lease tier's documented
    at-least-once edge (docs/concepts.md: jobs should be idempotent; the fencing token
    guards their writes). Counted, not a broken promise.
take-over / hand-over
    A later attempt that started after the earlier one died; a hand-over when
    the earlier instance was stopped with SIGTERM (it released the lease).
    The time is measured from the earlier run's last sign of life: its
    ``cancel`` line, its kill, or the cut of its link.
coalesced
    A slot nobody ran because a later run covered it (``missed`` slots ending
    at that run's slot): a catch-up, or a run whose claim superseded a dead
    run (``Grant.supersedes``: the dead run's slot and those skipped for it).
    A catch-up that coalesced missed slots and was itself skipped for overlap
    (the job still running) skips them with it: its record's ``missed`` counts
    them, and they count as skipped.
abandoned
    Lease backends: a slot granted to an instance that could not run it to its
    end (killed, or its answer lost on a cut link) whose lease expired after
    the job's next slot was decided; the lease rules mark it ``abandoned`` ("the newer
    slot runs the job anyway"). Read from the backend's history.
lost, runner died (a)
    Claim backends: a slot whose only run's instance was killed or stopped
    mid-run.
lost otherwise (b)
    Every other slot with no finished run and no excuse above.

An *abandoned* slot whose next slot did not run either (it was skipped for
overlap with the dying run, or abandoned too) breaks the promise that no slot is lost while an instance is up
("no slot is lost while at least one instance is alive") although each step
follows the lease rules (docs/concepts.md): with ``lease_ms`` longer than the job's period,
a dead winner's lease makes the next slot skip, and that skipped slot makes
the dead run superseded. The verdict counts it as broken when an instance was
up; ``--rules-only`` judges by the lease rules alone and lists it as a warning.

A lease backend breaks its promise when a slot is lost (b) or a started run
is never finished nor taken over while at least one instance was *up*: its
process alive and ready, its link not dropped or held, the broker not down
(restart, or SQLite's write lock held). Excluded, with the reason counted:
slots whose claim window ([slot - 600 ms, slot + jitter + 600 ms], the skew
being ±500 ms) saw no instance up; runs cut short by the final stop; and, for
a broker without persistence, slots within ``max_late_ms`` after its restart.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anarchon_conformance.fleet import grant_of
from anarchon_conformance.ledger import GrantKey

__all__ = ["Timeline", "Verdict", "judge"]

SKEW_MARGIN_MS = 600


@dataclass
class Timeline:
    """What the harness did and when, in epoch ms (the ledger's clock)."""

    ends: dict[str, tuple[int, str]] = field(default_factory=dict)
    links: list[tuple[int, int, int, str]] = field(default_factory=list)  # seat, start, end, label
    broker: list[tuple[int, int, str]] = field(default_factory=list)
    events: list[tuple[str, int, int | None, str]] = field(default_factory=list)
    planned_faults: list[str] = field(default_factory=list)
    stopped_ms: int = 0

    def planned(self, fault: Any) -> None:
        self.planned_faults.append(fault.kind)

    def event(self, kind: str, t: int, seat: int | None = None, detail: str = "") -> None:
        self.events.append((kind, t, seat, detail))

    def instance_ended(self, instance: str, t: int, why: str) -> None:
        self.ends[instance] = (t, why)
        if why in ("kill9", "term"):
            self.event(why, t, seat_of(instance), instance)

    def ended(self, instance: str) -> bool:
        return instance in self.ends

    def link_down(self, seat: int, start: int, end: int, label: str) -> None:
        self.links.append((seat, start, end, label))

    def broker_down(self, start: int, end: int, label: str) -> None:
        self.broker.append((start, end, label))
        self.event("restart" if label == "restart" else "lockstall", start, None, label)

    def fault_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for kind, _, _, _ in self.events:
            counts[kind] += 1
        return counts


def seat_of(instance: str) -> int:
    m = re.search(r"-s(\d+)$", instance)
    return int(m.group(1)) if m else -1


@dataclass
class Verdict:
    backend: str
    kind: str
    instances: int = 0
    jobs: int = 0
    slots: int = 0
    runs: int = 0
    duplicates: list[str] = field(default_factory=list)
    re_runs: list[str] = field(default_factory=list)
    take_over_ms: list[int] = field(default_factory=list)
    hand_over_ms: list[int] = field(default_factory=list)
    skipped_overlap: int = 0
    coalesced: int = 0
    catch_up_runs: int = 0
    abandoned: int = 0
    #: Abandoned slots whose next slot did not run either (see the module docstring).
    abandoned_chains: int = 0
    lost_died: int = 0
    lost_other: Counter[str] = field(default_factory=Counter)
    excluded: Counter[str] = field(default_factory=Counter)
    broken: list[str] = field(default_factory=list)
    #: Within the rules, but worth a look: an abandoned slot whose next slot did not run either.
    warnings: list[str] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    workdir: str = ""
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and not self.duplicates and not self.broken

    @property
    def lost_other_total(self) -> int:
        return sum(self.lost_other.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "kind": self.kind,
            "passed": self.passed,
            "instances": self.instances,
            "jobs": self.jobs,
            "slots": self.slots,
            "runs": self.runs,
            "duplicates": self.duplicates,
            "re_runs": self.re_runs,
            "take_over_ms": self.take_over_ms,
            "hand_over_ms": self.hand_over_ms,
            "skipped_overlap": self.skipped_overlap,
            "coalesced": self.coalesced,
            "catch_up_runs": self.catch_up_runs,
            "abandoned": self.abandoned,
            "abandoned_chains": self.abandoned_chains,
            "lost_runner_died": self.lost_died,
            "lost_other": dict(self.lost_other),
            "excluded": dict(self.excluded),
            "broken": self.broken,
            "warnings": self.warnings,
            "faults": dict(self.faults),
            "seconds": self.seconds,
            "notes": self.notes,
            "plan": self.plan,
            "workdir": self.workdir,
            "error": self.error,
        }


def _span(ms: Sequence[int]) -> str:
    if not ms:
        return "-"
    return f"{len(ms)} (median {int(statistics.median(ms))} ms, max {max(ms)} ms)"


class _Health:
    """Who was up when: alive and ready, linked, broker up."""

    def __init__(self, ledger: Iterable[dict[str, Any]], timeline: Timeline) -> None:
        self.lives: list[tuple[int, int, int]] = []  # seat, ready, end
        for rec in ledger:
            if rec["e"] == "ready":
                end = timeline.ends.get(rec["instance"], (timeline.stopped_ms or 2**62, ""))[0]
                self.lives.append((seat_of(rec["instance"]), rec["t"], end))
        self.links = timeline.links
        self.broker = timeline.broker

    def up_throughout(self, start: int, end: int) -> bool:
        """Some instance was up during all of ``[start, end]``."""
        if any(s < end and e > start for s, e, _ in self.broker):
            return False
        for seat, ready, gone in self.lives:
            cut = any(ls == seat and s < end and e > start for ls, s, e, _ in self.links)
            if ready <= start and gone >= end and not cut:
                return True
        return False

    def up_at_some_point(self, start: int, end: int, step: int = 100) -> bool:
        return any(self.up_throughout(t, t + step) for t in range(start, end, step))


def _handed_over(
    run: dict[str, Any],
    key: tuple[str, int],
    ends: dict[GrantKey, dict[str, Any]],
    cancelled: dict[tuple[str, int], dict[GrantKey, dict[str, Any]]],
    timeline: Timeline,
) -> bool:
    """Whether a run was cancelled by its instance's graceful stop (and so released, not lost)."""
    rk = grant_of(run)
    if rk in ends:
        return False
    stopped, why = timeline.ends.get(run["instance"], (0, ""))
    cancel = cancelled.get(key, {}).get(rk)
    return why == "term" and cancel is not None and cancel["t"] >= stopped


def _last_sign(run: dict[str, Any], stops: dict[GrantKey, dict[str, Any]], timeline: Timeline) -> int:
    """When an unfinished run was last known alive."""
    key = grant_of(run)
    if key in stops:
        return int(stops[key]["t"])
    seat = seat_of(run["instance"])
    candidates = [timeline.ends[run["instance"]][0]] if run["instance"] in timeline.ends else []
    candidates += [s for ls, s, e, _ in timeline.links if ls == seat and e >= run["t"]]
    candidates += [s for s, e, _ in timeline.broker if e >= run["t"]]
    after = [c for c in candidates if c >= run["t"]]
    return min(after) if after else int(run["t"])


def judge(
    *,
    backend: str,
    lease: bool,
    ledger: Sequence[dict[str, Any]],
    expected: dict[str, list[int]],
    history: dict[str, list[Any]],
    timeline: Timeline,
    options: dict[str, Any],
    slow_job: str,
    persistent: bool,
    instances: int,
    jobs: int,
    rules_only: bool = False,
) -> Verdict:
    v = Verdict(backend, "lease" if lease else "claim", instances=instances, jobs=jobs)
    v.faults = timeline.fault_counts()
    jitter = int(options.get("jitter_ms", 0))
    lease_ms = int(options.get("lease_ms", 0))
    max_late = int(options.get("max_late_ms", 60_000))
    max_attempts = int(options.get("max_attempts", 3))
    health = _Health(ledger, timeline)

    starts: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    finished: dict[tuple[str, int], dict[GrantKey, dict[str, Any]]] = defaultdict(dict)
    cancelled: dict[tuple[str, int], dict[GrantKey, dict[str, Any]]] = defaultdict(dict)
    skips: set[tuple[str, int]] = set()
    unknown: set[tuple[str, int]] = set()
    late: set[tuple[str, int]] = set()
    covered: set[tuple[str, int]] = set()
    for rec in ledger:
        if "job" not in rec or rec.get("manual"):
            continue
        key = (rec["job"], rec["slot"])
        # One grant: the same instance may run one attempt twice under two fencing tokens (its
        # heartbeat lapsed, it gave the run up as handed over and took it back), two runs, not one.
        run_key = (rec["instance"], rec.get("attempt", 0), rec.get("fencing"))  # as grant_of
        if rec["e"] == "start":
            starts[key].append(rec)
            if rec.get("catch_up") or rec.get("missed"):
                v.catch_up_runs += 1
                slots = expected.get(rec["job"], [])
                older = [s for s in slots if s <= rec["slot"]][-max(1, int(rec.get("missed") or 1)) :]
                covered.update((rec["job"], s) for s in older if s != rec["slot"])
        elif rec["e"] == "end":
            finished[key][run_key] = rec
        elif rec["e"] == "cancel":
            cancelled[key][run_key] = rec
        elif rec["e"] == "skip":
            (skips if rec.get("reason") == "overlap" else late).add(key)
        elif rec["e"] == "lost" and rec.get("reason") == "unknown":
            unknown.add(key)
    recorded: dict[tuple[str, int], list[Any]] = defaultdict(list)
    skipped_with: set[tuple[str, int]] = set()  # older slots a skipped catch-up coalesced
    for job, runs in history.items():
        for run in runs:
            if not getattr(run, "manual", False):
                recorded[(job, run.slot_ms)].append(run)
                missed = int(getattr(run, "missed", 0) or 0)
                if "skipped" in str(getattr(run, "status", "")) and missed > 1:
                    older = [s for s in expected.get(job, []) if s < run.slot_ms][-(missed - 1) :]
                    skipped_with.update((job, s) for s in older)

    final_stop = timeline.stopped_ms
    outcome: dict[tuple[str, int], str] = {}
    restarts = [s for s, _, label in timeline.broker if label == "restart"]

    for job, slots in sorted(expected.items()):
        for slot in slots:
            key = (job, slot)
            v.slots += 1
            runs = sorted(starts.get(key, []), key=lambda r: r["t"])
            ends = finished.get(key, {})
            stops = {**cancelled.get(key, {}), **ends}
            v.runs += len(ends)
            label = f"{job} @ {slot}"

            # -- duplicates: concurrent runs, repeated attempts, any second run on a claim backend
            intervals = []
            for r in runs:
                rk = grant_of(r)
                stop = stops[rk]["t"] if rk in stops else _last_sign(r, stops, timeline)
                if rk not in stops and r["instance"] not in timeline.ends:
                    stop = final_stop or 2**62
                intervals.append((r["t"], stop, r))
            grants = [grant_of(r) for r in runs]
            overlap = [
                (a[2], b[2]) for i, a in enumerate(intervals) for b in intervals[i + 1 :] if b[0] < a[1] and a[0] < b[1]
            ]
            if len(grants) != len(set(grants)) or (not lease and len(runs) > 1) or overlap:
                who = ", ".join(f"{r['instance']}#{r['attempt']}@{r['t']}" for r in runs)
                v.duplicates.append(f"{label}: {who}")
                continue

            # -- several attempts: take-over, hand-over or re-run
            for earlier, later in itertools.pairwise(runs):
                ek = grant_of(earlier)
                if ek in ends:
                    v.re_runs.append(
                        f"{label}: {earlier['instance']}#{earlier['attempt']} ended at {ends[ek]['t']}, lease lost "
                        f"before it was recorded; {later['instance']}#{later['attempt']} ran it again at {later['t']}"
                    )
                    continue
                sign = _last_sign(earlier, stops, timeline)
                if _handed_over(earlier, key, ends, cancelled, timeline):
                    v.hand_over_ms.append(int(later["t"] - sign))
                else:
                    v.take_over_ms.append(int(later["t"] - sign))

            if ends:
                outcome[key] = "ran"
                continue
            if key in skips and not runs:
                v.skipped_overlap += 1
                outcome[key] = "skipped"
                continue
            if key in covered and not runs:
                v.coalesced += 1
                continue
            statuses = {str(getattr(r, "status", "")) for r in recorded.get(key, [])}
            if not runs and (any("skipped" in s for s in statuses) or key in skipped_with):
                v.skipped_overlap += 1
                outcome[key] = "skipped"
                continue

            # -- nothing finished: why?
            if runs:
                last = runs[-1]
                _, why = timeline.ends.get(last["instance"], (0, ""))
                if why == "final stop" or (final_stop and _last_sign(last, stops, timeline) >= final_stop - 50):
                    v.excluded["run cut short by the final stop"] += 1
                    continue
                if not lease:
                    if why in ("kill9", "term", "exited"):
                        v.lost_died += 1
                    else:
                        v.lost_other["run cut off mid-run"] += 1
                    continue
                if any("abandoned" in s for s in statuses):
                    v.abandoned += 1
                    # Its last try died at max_attempts: the retries the user allowed are used up.
                    used_up = last["attempt"] >= max_attempts and not _handed_over(last, key, ends, cancelled, timeline)
                    outcome[key] = "used up" if used_up else "abandoned"
                    if used_up:
                        v.warnings.append(
                            f"{label}: abandoned after attempt {last['attempt']} died (max_attempts={max_attempts}, "
                            "the lease rules); the slots it overlapped were skipped by the rules"
                        )
                    continue
                sign = _last_sign(last, stops, timeline)
                if health.up_at_some_point(sign + lease_ms, sign + lease_ms + 2 * max(lease_ms, 1000)):
                    v.lost_other["started, never finished nor taken over"] += 1
                    v.broken.append(
                        f"{label}: {last['instance']}#{last['attempt']} stopped at {sign} ({why or 'cut off'}); "
                        f"nobody took it over though an instance was up; history: {sorted(statuses) or 'none'}"
                    )
                else:
                    v.excluded["runner lost while no instance was up"] += 1
                continue

            if lease and any("abandoned" in s for s in statuses):
                v.abandoned += 1
                outcome[key] = "abandoned"
                continue
            if final_stop and slot + jitter + SKEW_MARGIN_MS >= final_stop:
                v.excluded["slot at the final stop"] += 1
                continue
            if not persistent and any(r <= slot <= r + max_late for r in restarts):
                v.excluded["within max_late_ms of a restart of a broker without persistence"] += 1
                continue
            window_up = health.up_at_some_point(slot - SKEW_MARGIN_MS, slot + jitter + SKEW_MARGIN_MS)
            if statuses:
                reason = "granted, never started (winner killed or its answer lost)"
            elif key in unknown:
                reason = "claim answer lost (unknown)"
            elif key in late:
                reason = "skipped as late"
            else:
                reason = "not claimed"
            if not lease:
                v.lost_other[reason if window_up else "no instance up"] += 1
                continue
            if not window_up:
                v.excluded["no instance up around the slot"] += 1
                continue
            v.lost_other[reason] += 1
            v.broken.append(
                f"{label}: missed ({reason}) while an instance was up; history: {sorted(statuses) or 'none'}"
            )
    for job, slots in expected.items():
        for slot, following in itertools.pairwise(slots):
            after = outcome.get((job, following))
            covered_later = (job, slot) in covered and (job, following) in covered
            if outcome.get((job, slot)) == "abandoned" and after in ("skipped", "abandoned") and not covered_later:
                line = (
                    f"{job} @ {slot}: its winner died or was cut off; abandoned as superseded (the lease rules), "
                    f"but the next slot {following} was {after} too (overlap with that dying run), so neither ran"
                )
                v.abandoned_chains += 1
                up = health.up_at_some_point(slot - SKEW_MARGIN_MS, following + jitter + SKEW_MARGIN_MS)
                (v.broken if up and not rules_only else v.warnings).append(line + ("" if up else "; no instance up"))
    return v


def summary_line(v: Verdict) -> str:
    return (
        f"{v.backend}: slots {v.slots}, runs {v.runs}, duplicates {len(v.duplicates)}, re-runs {len(v.re_runs)}, "
        f"take-overs {_span(v.take_over_ms)}, hand-overs {_span(v.hand_over_ms)}, abandoned {v.abandoned}, "
        f"lost (a) {v.lost_died}, lost (b) {v.lost_other_total}, broken {len(v.broken)}"
    )
