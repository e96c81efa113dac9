"""Real instance processes sharing one backend, and a ledger that judges them.

Promises about many instances can only be shown with many processes: a test
asks a :class:`Fleet` for N OS processes, each running a :class:`Scheduler`
with the same every-second jobs, kills some with ``SIGKILL``, stops the rest,
and reads the ledger. Every instance appends one JSON line when a run starts,
ends, or a slot is skipped for overlap, to a file outside the backend
(``O_APPEND`` writes of one short line are atomic on a local file system), so
the ledger survives whatever happens to the backend and to the instances.

:func:`reconcile` turns the ledger into figures: slots, runs, duplicates,
missed slots, take-overs and how long each took.

The instance side is ``python -m anarchon_conformance.fleet instance …``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Fleet",
    "FleetReport",
    "SlotRow",
    "TakeOver",
    "assert_every_slot_once",
    "build_backend",
    "grant_of",
    "read_ledger",
    "reconcile",
]

READY = "anarchon-fleet-ready"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- the instance process ------------------------------------------------------------


class _Ledger:
    """Appends one JSON line per event; one ``write`` per line keeps lines whole."""

    def __init__(self, path: str, instance: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.instance = instance

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"e": event, "instance": self.instance, "t": _now_ms(), **fields}) + "\n"
        os.write(self.fd, line.encode())


def build_backend(
    backend: str | None = None, backend_class: str | None = None, backend_kwargs: dict[str, Any] | None = None
) -> Any:
    """The backend a fleet member uses: a URL as is, or ``module:Class`` built with keyword arguments."""
    if backend_class:
        module, _, name = backend_class.partition(":")
        cls = getattr(importlib.import_module(module), name)
        return cls(**(backend_kwargs or {}))
    return backend


def _build_backend(args: argparse.Namespace) -> Any:
    return build_backend(args.backend, args.backend_class, json.loads(args.backend_kwargs or "{}"))


def _instance_main(args: argparse.Namespace) -> None:
    from anarchon import RunContext, Scheduler, SkewedClock, hookimpl

    ledger = _Ledger(args.ledger, args.id)

    class Observer:
        @hookimpl
        def anarchon_scheduler_started(self, scheduler: Scheduler) -> None:
            ledger.write("ready", pid=os.getpid())
            print(READY, flush=True)

        @hookimpl
        def anarchon_slot_skipped(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
            ledger.write("skip", job=job.name, slot=slot_ms, reason=reason)

        @hookimpl
        def anarchon_claim_lost(self, scheduler: Scheduler, job: Any, slot_ms: int, reason: str) -> None:
            if reason != "lost":  # "unknown" (answer lost) and "stale" (lease lost mid-run)
                ledger.write("lost", job=job.name, slot=slot_ms, reason=reason)

    scheduler = Scheduler(
        _build_backend(args),
        instance_id=args.id,
        plugins=[Observer()],
        clock=SkewedClock(args.skew_ms) if args.skew_ms else None,
    )
    options = json.loads(args.options or "{}")

    def make(name: str, seconds: float) -> Any:
        async def job(ctx: RunContext) -> None:
            fields = {"job": name, "slot": ctx.slot_ms, "attempt": ctx.attempt, "fencing": ctx.fencing}
            ledger.write("start", **fields, catch_up=ctx.catch_up, missed=ctx.missed, manual=ctx.manual)
            try:
                if seconds:
                    await asyncio.sleep(seconds)
            except asyncio.CancelledError:
                ledger.write("cancel", **fields, lease_lost=ctx.lease_lost)  # when it stopped tells overlap
                raise
            ledger.write("end", **fields)

        return job

    for i in range(args.jobs):
        name = f"{args.job_prefix}{i:02d}"
        scheduler.add(name, args.cron, make(name, 0), **options)
    if args.slow_cron:
        slow_options = {**options, **json.loads(args.slow_options or "{}")}
        name = f"{args.job_prefix}slow"
        scheduler.add(name, args.slow_cron, make(name, args.slow_seconds), **slow_options)
    scheduler.run(grace_ms=args.grace_ms)


def _instance_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m anarchon_conformance.fleet instance")
    p.add_argument("--id", required=True)
    p.add_argument("--ledger", required=True)
    p.add_argument("--backend", help="backend URL")
    p.add_argument("--backend-class", help="module:Class, built with --backend-kwargs")
    p.add_argument("--backend-kwargs", help="JSON object")
    p.add_argument("--jobs", type=int, default=5)
    p.add_argument("--job-prefix", default="job-")
    p.add_argument("--cron", default="* * * * * *")
    p.add_argument("--options", help="JSON object of job options")
    p.add_argument("--slow-cron")
    p.add_argument("--slow-seconds", type=float, default=3.0)
    p.add_argument("--slow-options", help="JSON object of options for the slow job")
    p.add_argument("--skew-ms", type=int, default=0)
    p.add_argument("--grace-ms", type=int, default=10_000)
    return p


# -- the ledger ------------------------------------------------------------------


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass(frozen=True)
class SlotRow:
    """What happened to one slot of one job, for the per-slot table."""

    job: str
    slot_ms: int
    runs: tuple[tuple[str, int, str], ...]  # (instance, attempt, "succeeded" | "died" | "running")
    skipped: bool

    @property
    def outcome(self) -> str:
        if self.skipped and not self.runs:
            return "skipped (overlap)"
        if not self.runs:
            return "MISSED"
        finished = [r for r in self.runs if r[2] == "succeeded"]
        return "DUPLICATE" if len(finished) > 1 else ("taken over" if len(self.runs) > 1 else "ran once")


@dataclass
class FleetReport:
    slots: int = 0
    runs: int = 0
    duplicates: int = 0
    missed: int = 0
    skipped: int = 0
    take_overs: int = 0
    take_over_ms: list[int] = field(default_factory=list)
    rows: list[SlotRow] = field(default_factory=list)
    duplicate_slots: list[tuple[str, int]] = field(default_factory=list)
    missed_slots: list[tuple[str, int]] = field(default_factory=list)

    def summary(self) -> str:
        took = f" (took {', '.join(f'{ms} ms' for ms in self.take_over_ms)})" if self.take_over_ms else ""
        return (
            f"slots: {self.slots}, runs: {self.runs}, duplicates: {self.duplicates}, "
            f"missed: {self.missed}, skipped (overlap): {self.skipped}, take-overs: {self.take_overs}{took}"
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


def grant_of(start: dict[str, Any]) -> tuple[str, int, int | None]:
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
    stop goes on as the same attempt elsewhere); a *take-over* is a slot whose later attempt
    started after an earlier one died; a slot is *missed* when nothing ran it
    and no instance recorded it as skipped for overlap. ``killed_at`` maps an
    instance to when it was killed, to time each take-over from the kill.
    """
    starts: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    ends: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    skips: set[tuple[str, int]] = set()
    for rec in ledger:
        key = (rec["job"], rec["slot"]) if "job" in rec else None
        if key is None:
            continue
        if rec["e"] == "start":
            starts[key].append(rec)
        elif rec["e"] == "end":
            ends[key].append(rec)
        elif rec["e"] == "skip" and rec.get("reason") == "overlap":
            skips.add(key)
    report = FleetReport()
    killed_at = killed_at or {}
    for job, slots in sorted(expected.items()):
        for slot in slots:
            key = (job, slot)
            report.slots += 1
            s, e = starts.get(key, []), ends.get(key, [])
            ended = {(r["instance"], r["attempt"]) for r in e}
            runs = tuple(
                (r["instance"], r["attempt"], "succeeded" if (r["instance"], r["attempt"]) in ended else "died")
                for r in sorted(s, key=lambda r: (r["attempt"], r["t"]))
            )
            grants = [grant_of(r) for r in s]
            if len(e) > 1 or len(grants) != len(set(grants)):
                report.duplicates += 1
                report.duplicate_slots.append(key)
            if not s and key not in skips:
                report.missed += 1
                report.missed_slots.append(key)
            if not s and key in skips:
                report.skipped += 1
            report.runs += len(e)
            by_time = sorted(s, key=lambda r: r["t"])
            for first, later in itertools.pairwise(by_time):
                if later["attempt"] > first["attempt"]:
                    report.take_overs += 1
                    report.take_over_ms.append(later["t"] - killed_at.get(first["instance"], first["t"]))
            report.rows.append(SlotRow(job, slot, runs, key in skips))
    return report


# -- the fleet, from the test's side ---------------------------------------------------------


@dataclass
class _Member:
    index: int
    instance: str
    process: subprocess.Popen[str]
    killed_at: int | None = None


class Fleet:
    """N instance processes of one scheduler configuration on one backend.

    Pass the backend as a URL (``backend=``) or as a class path with keyword
    arguments (``backend_class="anarchon_redis:RedisBackend"``,
    ``backend_kwargs={...}``) when the URL cannot say everything (a prefix, a
    schema). Use it as a context manager: every process it started is killed
    on exit, whatever happened.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        backend: str | None = None,
        backend_class: str | None = None,
        backend_kwargs: dict[str, Any] | None = None,
        instances: int = 4,
        jobs: int = 5,
        cron: str = "* * * * * *",
        options: dict[str, Any] | None = None,
        slow_cron: str | None = None,
        slow_seconds: float = 3.0,
        slow_options: dict[str, Any] | None = None,
        job_prefix: str = "job-",
        skews_ms: Sequence[int] = (),
        grace_ms: int = 10_000,
        env: dict[str, str] | None = None,
    ) -> None:
        if not backend and not backend_class:
            raise ValueError("Fleet needs backend= (a URL) or backend_class= (module:Class)")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ledger_path = self.workdir / "ledger.jsonl"
        self.options = dict(options or {})
        self.slow_options = dict(slow_options or {})
        self.jobs = jobs
        self.cron = cron
        self.slow_cron = slow_cron
        self.job_prefix = job_prefix
        self._argv_base = [
            sys.executable,
            "-m",
            "anarchon_conformance.fleet",
            "instance",
            "--ledger",
            str(self.ledger_path),
        ]
        self._argv_base += [
            "--jobs",
            str(jobs),
            "--cron",
            cron,
            "--job-prefix",
            job_prefix,
            "--grace-ms",
            str(grace_ms),
        ]
        self._argv_base += ["--options", json.dumps(self.options)]
        if backend:
            self._argv_base += ["--backend", backend]
        else:
            assert backend_class is not None
            self._argv_base += ["--backend-class", backend_class, "--backend-kwargs", json.dumps(backend_kwargs or {})]
        if slow_cron:
            self._argv_base += ["--slow-cron", slow_cron, "--slow-seconds", str(slow_seconds)]
            self._argv_base += ["--slow-options", json.dumps(self.slow_options)]
        self.count = instances
        self.skews = list(skews_ms)
        self.env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.members: list[_Member] = []
        self.ready_ms: int | None = None
        self.stopping_ms: int | None = None
        self._spawned = 0

    # lifecycle

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        for m in self.members:
            if m.process.poll() is None:
                m.process.kill()
                m.process.wait()

    def start(self, timeout: float = 60.0) -> None:
        """Start every instance and wait until each has started its scheduler."""
        new = [self._spawn() for _ in range(self.count)]
        self._wait_ready(new, timeout)
        self.ready_ms = _now_ms()

    def member_name(self, index: int) -> str:
        """The instance id of the ``index``-th process started; override to encode more in it."""
        return f"instance-{index + 1}"

    def member_argv(self, index: int, instance: str) -> list[str]:
        """The arguments of one instance; override to vary the backend or clock per instance."""
        skew = self.skews[index % len(self.skews)] if self.skews else 0
        return [*self._argv_base, "--id", instance, "--skew-ms", str(skew)]

    def _spawn(self) -> _Member:
        index = self._spawned
        self._spawned += 1
        instance = self.member_name(index)
        argv = self.member_argv(index, instance)
        log = open(self.workdir / f"{instance}.log", "w")  # noqa: SIM115 - the child owns it
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=self.env)
        log.close()
        member = _Member(index, instance, process)
        self.members.append(member)
        return member

    def _wait_ready(self, members: Sequence[_Member], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        waiting = {m.process.stdout: m for m in members if m.process.stdout is not None}
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"instances not ready after {timeout} s: {self._logs(waiting.values())}")
            readable, _, _ = select.select(list(waiting), [], [], left)
            for stream in readable:
                line = stream.readline()
                member = waiting[stream]
                if not line:
                    raise RuntimeError(f"{member.instance} exited before it was ready: {self._logs([member])}")
                if line.strip() == READY:
                    del waiting[stream]

    def _logs(self, members: Any) -> str:
        return "; ".join(f"{m.instance}: {(self.workdir / f'{m.instance}.log').read_text()[-2000:]!r}" for m in members)

    def alive(self) -> list[_Member]:
        return [m for m in self.members if m.process.poll() is None]

    def kill(self, member: _Member) -> int:
        """``kill -9`` one instance; returns when it was killed (epoch ms)."""
        member.process.send_signal(signal.SIGKILL)
        member.process.wait()
        member.killed_at = _now_ms()
        return member.killed_at

    def restart(self, timeout: float = 60.0) -> _Member:
        member = self._spawn()
        self._wait_ready([member], timeout)
        return member

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every live instance (a graceful stop) and wait for them."""
        self.stopping_ms = _now_ms()
        for m in self.alive():
            m.process.send_signal(signal.SIGTERM)
        for m in self.members:
            try:
                m.process.wait(timeout)
            except subprocess.TimeoutExpired:
                m.process.kill()
                m.process.wait()

    # observing

    def ledger(self) -> list[dict[str, Any]]:
        return read_ledger(self.ledger_path)

    def wait_for(self, predicate: Any, timeout: float = 30.0, poll: float = 0.05) -> dict[str, Any]:
        """The first ledger record matching ``predicate``, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for rec in self.ledger():
                if predicate(rec):
                    return rec
            time.sleep(poll)
        raise TimeoutError(f"no ledger record matched within {timeout} s")

    def run_for(self, seconds: float) -> FleetReport:
        """Start, let the instances work ``seconds``, stop them gracefully, and reconcile."""
        self.start()
        time.sleep(seconds)
        self.stop()
        return self.report()

    def take_over_after_kill(self, job: str, timeout: float = 30.0) -> TakeOver:
        """``kill -9`` the instance that next starts ``job``; wait until another finishes that run."""
        first = self.wait_for(lambda r: r["e"] == "start" and r.get("job") == job, timeout)
        killed_at = self.kill(self.member(first["instance"]))

        def same_run(r: dict[str, Any], event: str) -> bool:
            return r["e"] == event and r.get("job") == job and r["slot"] == first["slot"] and r["attempt"] > 1

        second = self.wait_for(lambda r: same_run(r, "start"), timeout)
        self.wait_for(lambda r: same_run(r, "end"), timeout)
        return TakeOver(first, second, killed_at)

    def member(self, instance: str) -> _Member:
        return next(m for m in self.members if m.instance == instance)

    def job_names(self) -> list[str]:
        names = [f"{self.job_prefix}{i:02d}" for i in range(self.jobs)]
        return [*names, f"{self.job_prefix}slow"] if self.slow_cron else names

    def expected(self, since_ms: int, until_ms: int) -> dict[str, list[int]]:
        """Every slot of every job in ``[since_ms, until_ms]``."""
        from anarchon.cron import Schedule

        out: dict[str, list[int]] = {}
        for name in self.job_names():
            cron = self.slow_cron if name.endswith("slow") and self.slow_cron else self.cron
            tz = (self.slow_options if name.endswith("slow") else self.options).get("timezone", "UTC")
            schedule = Schedule(cron, tz)
            slots, t = [], since_ms - 1
            while (t := schedule.next_after(t)) <= until_ms:
                slots.append(t)
            out[name] = slots
        return out

    def report(self, since_ms: int | None = None, until_ms: int | None = None) -> FleetReport:
        """Reconcile the ledger over a window; by default from ready + jitter to the stop."""
        jitter = max(int(self.options.get("jitter_ms", 2000)), int(self.slow_options.get("jitter_ms", 0)))
        since = since_ms if since_ms is not None else (self.ready_ms or 0) + 1000
        until = until_ms if until_ms is not None else (self.stopping_ms or _now_ms()) - jitter - 1000
        killed = {m.instance: m.killed_at for m in self.members if m.killed_at is not None}
        return reconcile(self.ledger(), self.expected(since, until), killed)


def iter_rows(report: FleetReport) -> Iterator[list[str]]:
    """Rows for a per-slot table: job, slot time, who ran it, outcome."""
    for row in report.rows:
        when = time.strftime("%H:%M:%S", time.gmtime(row.slot_ms / 1000))
        who = ", ".join(f"{i} (attempt {a}{'' if s == 'succeeded' else ', ' + s})" for i, a, s in row.runs) or "-"
        yield [row.job, when, who, row.outcome]


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "instance":
        raise SystemExit("usage: python -m anarchon_conformance.fleet instance --id ID --ledger PATH …")
    _instance_main(_instance_parser().parse_args(args[1:]))


if __name__ == "__main__":
    main()
