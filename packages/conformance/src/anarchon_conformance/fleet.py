"""Real instance processes sharing one backend, started, killed and stopped by a test.

Promises about many instances can only be shown with many processes: a test
asks a :class:`Fleet` for N OS processes, each running a :class:`Scheduler`
with the same every-second jobs (:mod:`anarchon_conformance.instance`), kills
some with ``SIGKILL``, stops the rest, and reads the ledger
(:mod:`anarchon_conformance.ledger`), which this module re-exports.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .instance import READY, build_backend
from .ledger import (
    FleetReport,
    SlotRow,
    TakeOver,
    assert_every_slot_once,
    grant_of,
    iter_rows,
    read_ledger,
    reconcile,
)

__all__ = [
    "Fleet",
    "FleetReport",
    "Member",
    "SlotRow",
    "TakeOver",
    "assert_every_slot_once",
    "build_backend",
    "grant_of",
    "iter_rows",
    "read_ledger",
    "reconcile",
]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Member:
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
        flaky: dict[str, dict[str, Any]] | None = None,
        job_seconds: float = 0.0,
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
            "anarchon_conformance.instance",
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
            "--job-seconds",
            str(job_seconds),
        ]
        self._argv_base += ["--options", json.dumps(self.options)]
        if backend:
            self._argv_base += ["--backend", backend]
        else:
            assert backend_class is not None
            self._argv_base += ["--backend-class", backend_class, "--backend-kwargs", json.dumps(backend_kwargs or {})]
        #: Touch this file and the next instance whose claim batch is granted kills itself (SIGKILL) before
        #: running any of it: a kill that lands mid-claim (``instance --die-mid-claim``).
        self.die_mid_claim = self.workdir / "die-mid-claim"
        self._argv_base += ["--die-mid-claim", str(self.die_mid_claim)]
        if flaky:
            # {"name": {"cron": "…", "fails": N, "options": {…}}}: raise on the first N tries of each slot.
            self._argv_base += ["--flaky", json.dumps(flaky)]
        if slow_cron:
            self._argv_base += ["--slow-cron", slow_cron, "--slow-seconds", str(slow_seconds)]
            self._argv_base += ["--slow-options", json.dumps(self.slow_options)]
        self.count = instances
        self.skews = list(skews_ms)
        self.env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.members: list[Member] = []
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

    def _spawn(self, instance: str | None = None) -> Member:
        index = self._spawned
        self._spawned += 1
        instance = instance or self.member_name(index)
        argv = self.member_argv(index, instance)
        log = open(self.workdir / f"{instance}.log", "w")  # noqa: SIM115 - the child owns it
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=self.env)
        log.close()
        member = Member(index, instance, process)
        self.members.append(member)
        return member

    def _wait_ready(self, members: Sequence[Member], timeout: float) -> None:
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

    def alive(self) -> list[Member]:
        return [m for m in self.members if m.process.poll() is None]

    def kill(self, member: Member) -> int:
        """``kill -9`` one instance; returns when it was killed (epoch ms)."""
        member.process.send_signal(signal.SIGKILL)
        member.process.wait()
        member.killed_at = _now_ms()
        return member.killed_at

    def restart(self, timeout: float = 60.0, *, instance: str | None = None) -> Member:
        """Start one more instance (with ``instance``: that id again, as a restarted pod keeps its name)."""
        member = self._spawn(instance)
        self._wait_ready([member], timeout)
        return member

    def kill_mid_claim(self, timeout: float = 10.0) -> tuple[dict[str, Any], set[tuple[str, int]]]:
        """The next instance whose claim batch is granted kills itself before running any of it.

        Returns its ``die`` ledger record and the ``(job, slot)`` grants it left in the store,
        each under a heartbeat that holds until it expires, with nobody to run them.
        """
        self.die_mid_claim.touch()
        died = self.wait_for(lambda r: r["e"] == "die", timeout=timeout)
        victim = self.member(died["instance"])
        victim.process.wait()
        victim.killed_at = died["t"]
        return died, {(job, slot) for job, slot in died["granted"]}

    def roll(self, timeout: float = 60.0, *, pause_s: float = 0.0, until: float | None = None) -> list[Member]:
        """A rolling restart, as a Kubernetes rollout does it: each live instance in turn gets
        SIGTERM (a graceful stop, its runs handed over), is waited for, and is replaced by a new
        process, started and ready before the next one stops, ``pause_s`` after the last one. Stops
        before the next instance once ``time.monotonic()`` passes ``until``. Returns the new members."""
        fresh: list[Member] = []
        for member in self.alive():
            if until is not None and time.monotonic() >= until:
                break
            member.process.send_signal(signal.SIGTERM)
            member.process.wait(timeout)
            fresh.append(self.restart(timeout))
            time.sleep(pause_s)
        return fresh

    def churn(self, until: float, *, seed: int, extra: int = 2, gap_s: float = 2.0, timeout: float = 60.0) -> int:
        """Instances join and leave, as an autoscaler makes them: the first :attr:`count` keep running.

        Every ``gap_s`` (±50 %, seeded), either a new process starts and is
        ready (while fewer than ``extra`` others run) or one of those others
        gets SIGTERM (a graceful stop: its runs handed over, its registry
        entry dropped), until ``time.monotonic()`` passes ``until``. Each
        change moves every instance's view of the fleet, so ranked claims
        rank the same slot differently on two instances for a moment.
        Returns how many joins and leaves there were.
        """
        rng = random.Random(seed)
        changes = 0
        while time.monotonic() < until:
            time.sleep(gap_s * rng.uniform(0.5, 1.5))
            others = [m for m in self.alive() if m.index >= self.count]
            if others and (len(others) >= extra or rng.random() < 0.5):
                leaving = rng.choice(others)
                leaving.process.send_signal(signal.SIGTERM)
                leaving.process.wait(timeout)
            else:
                self.restart(timeout)
            changes += 1
        return changes

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

    def member(self, instance: str) -> Member:
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
            options = self.slow_options if name.endswith("slow") else self.options
            schedule = Schedule(cron, options.get("timezone", "UTC"), dst=options.get("dst", "cron"), name=name)
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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m anarchon_conformance.fleet instance …``, the instance's older spelling."""
    from .instance import main as instance_main

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "instance":
        raise SystemExit("usage: python -m anarchon_conformance.instance --id ID --ledger PATH …")
    instance_main(args[1:])


if __name__ == "__main__":
    main()
