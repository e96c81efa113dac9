"""One backend's scenario: its own broker, a proxy per seat, a fleet, the plan, the verdict.

Everything started here is stopped here, whatever fails: instances (the
fleet's context), proxies (their loop), the broker (``finally``), and the
lock-holding thread of a SQLite stall (joined).
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backends import BROKERS
from .brokers import Broker
from .fleet import ChaosFleet, LedgerTail
from .judge import Timeline, Verdict, judge
from .plan import Fault, make_plan
from .proxy import Proxy, ProxyLoop

__all__ = ["Config", "run_scenario"]

SLOW_JOB = "job-slow"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Config:
    instances: int = 5
    jobs: int = 20
    seconds: float = 60.0
    seed: int = 1
    short: bool = False
    jitter_ms: int = 200
    lease_ms: int = 2000
    max_late_ms: int = 10_000
    slow_cron: str = "*/6 * * * * *"
    slow_seconds: float = 4.0
    grace_ms: int = 500
    skews_ms: tuple[int, ...] = (500, -500, 0)
    workdir: Path | None = None
    #: Judge by the lease rules alone (docs/concepts.md): an abandoned slot never breaks a promise.
    rules_only: bool = False

    def seat_skews(self) -> list[int]:
        return [self.skews_ms[i] if i < len(self.skews_ms) else 0 for i in range(self.instances)]


@dataclass
class _Harness:
    """What the plan acts on, and the timeline it leaves for the judge."""

    fleet: ChaosFleet
    broker: Broker
    proxies: list[Proxy]
    tail: LedgerTail
    timeline: Timeline
    say: Callable[[str], None]
    threads: list[threading.Thread] = field(default_factory=list)
    restarts: list[tuple[float, int]] = field(default_factory=list)  # (due monotonic, seat)
    heals: list[tuple[float, Callable[[], None]]] = field(default_factory=list)
    armed: list[tuple[float, Fault]] = field(default_factory=list)  # (give-up monotonic, fault)
    broker_up: threading.Event = field(default_factory=threading.Event)
    slow_cron: str = "* * * * * *"

    @property
    def next_slow_slot_ms(self) -> int:
        from anarchon.cron import Schedule

        return Schedule(self.slow_cron, "UTC").next_after(_now_ms())

    # -- who is where -----------------------------------------------------------------

    def seat_alive(self, seat: int) -> bool:
        member = self.fleet.occupant.get(seat)
        return member is not None and member.process.poll() is None

    def slow_runner_seat(self) -> int | None:
        """The seat whose live instance is running the slow job now, if any."""
        self.tail.poll()
        open_runs: dict[tuple[int, int], str] = {}
        for rec in self.tail.records:
            if rec.get("job") != SLOW_JOB or rec["e"] not in ("start", "end", "cancel"):
                continue
            key = (rec["slot"], rec["attempt"])
            if rec["e"] == "start":
                open_runs[key] = rec["instance"]
            elif rec["e"] in ("end", "cancel"):
                open_runs.pop(key, None)
        for instance in reversed(list(open_runs.values())):
            seat = self.fleet.seat_of.get(instance)
            if seat is not None and self.seat_alive(seat) and self.fleet.occupant[seat].instance == instance:
                return seat
        return None

    # -- faults -----------------------------------------------------------------------------

    def strike(self, fault: Fault) -> bool:
        """Inject one fault now; ``False`` when it cannot hit anything yet (try again later)."""
        now = time.monotonic()
        if fault.targeted:
            seat = self.slow_runner_seat()
            if seat is None:
                return False
            fault.seat = seat
        seat = fault.seat
        if fault.kind in ("kill9", "term"):
            assert seat is not None
            if not self.seat_alive(seat):
                return False
            member = self.fleet.occupant[seat]
            if fault.kind == "kill9":
                t = self.fleet.kill(member)
            else:
                t = _now_ms()
                member.process.send_signal(signal.SIGTERM)
            self.timeline.instance_ended(member.instance, t, fault.kind)
            self.restarts.append((now + fault.duration_s, seat))
            self.say(
                f"{fault.kind} {member.instance} (seat {seat}){' mid-run of the slow job' if fault.targeted else ''}"
            )
        elif fault.kind == "drop":
            assert seat is not None
            self.timeline.event("drop", _now_ms(), seat)
            self._link(seat, "drop", fault.duration_s, "drop")
        elif fault.kind == "hold":
            assert seat is not None
            then = fault.detail["then"]
            self.timeline.event(f"hold-{then}", _now_ms(), seat)
            self._link(seat, "hold", fault.duration_s, f"hold b2c then {then}", then)
        elif fault.kind == "slow":
            assert seat is not None
            proxy = self.proxies[seat]
            proxy.set("slow", "both", fault.detail["delay_ms"])
            self.timeline.event("slow", _now_ms(), seat=seat, detail=f"{fault.detail['delay_ms']} ms per chunk")
            self.heals.append((now + fault.duration_s, lambda: proxy.heal()))
            self.say(f"slow link seat {seat}: {fault.detail['delay_ms']} ms per chunk for {fault.duration_s:.1f} s")
        elif fault.kind == "holdall":
            ahead = self.next_slow_slot_ms - _now_ms()
            if not 600 <= ahead <= 900:  # before the +500 ms seat claims, after the previous slot's claims
                return False
            self.timeline.event("hold-all", _now_ms(), None, f"{ahead} ms before a slow slot")
            for each in range(len(self.proxies)):
                self._link(each, "hold", fault.duration_s, "hold b2c then release (every seat, at a slow slot)")
        elif fault.kind == "restart":
            self._spawn_thread(self._restart_broker, fault.duration_s)
        elif fault.kind == "lockstall":
            self._spawn_thread(self._lock_stall, fault.duration_s)
        else:
            raise ValueError(f"unknown fault kind {fault.kind!r}")
        return True

    def _link(self, seat: int, mode: str, seconds: float, label: str, then: str = "release") -> None:
        proxy = self.proxies[seat]
        start = _now_ms()
        if mode == "drop":
            proxy.set("drop")
        else:
            proxy.hold_answers_after()  # from the next request on: it reaches the broker, its answer does not
        self.say(f"{label} seat {seat} for {seconds:.1f} s")

        def heal() -> None:
            if then == "drop":
                proxy.set("drop")
            proxy.heal()
            self.timeline.link_down(seat, start, _now_ms(), label)

        self.heals.append((time.monotonic() + seconds, heal))

    def _spawn_thread(self, target: Callable[[float], None], seconds: float) -> None:
        thread = threading.Thread(target=target, args=(seconds,), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _restart_broker(self, down_s: float) -> None:
        self.broker_up.clear()
        start = _now_ms()
        self.say(f"broker restart: kill, {down_s:.1f} s down, start")
        try:
            self.broker.restart(down_s)
        finally:
            end = _now_ms()
            self.timeline.broker_down(start, end, "restart")
            self.broker_up.set()
            self.say(f"broker back after {(end - start) / 1000:.1f} s")

    def _lock_stall(self, seconds: float) -> None:
        path = self.broker.backend_kwargs(0, "")["path"]
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            start = _now_ms()
            self.say(f"SQLite write lock held for {seconds:.1f} s")
            time.sleep(seconds)
            conn.execute("ROLLBACK")
            self.timeline.broker_down(start, _now_ms(), "write lock held")
        finally:
            conn.close()

    # -- the loop -------------------------------------------------------------------------------

    def tick(self) -> None:
        now = time.monotonic()
        for due, heal in [h for h in self.heals if h[0] <= now]:
            self.heals.remove((due, heal))
            heal()
        for due, seat in sorted(r for r in self.restarts if r[0] <= now):
            member = self.fleet.occupant.get(seat)
            if member is not None and member.process.poll() is None:
                continue  # a SIGTERM'd instance still handing over
            if not self.broker_up.is_set():
                continue  # start() would fail against a broker that is down
            self.restarts.remove((due, seat))
            new = self.fleet.spawn_on(seat)
            self.say(f"started {new.instance} on seat {seat}")
        for give_up, fault in list(self.armed):
            if self.strike(fault):
                self.armed.remove((give_up, fault))
            elif now > give_up:
                self.armed.remove((give_up, fault))
                fault.targeted = False
                if not self.strike(fault):
                    self.say(f"skipped {fault.kind}: nothing to hit")
        self.check_crashed()

    def check_crashed(self) -> None:
        """An instance that died on its own (say, start() against a cut link) is started again."""
        for seat, member in self.fleet.occupant.items():
            if member.process.poll() is not None and not self.timeline.ended(member.instance):
                self.timeline.instance_ended(member.instance, _now_ms(), "exited")
                self.say(f"{member.instance} exited by itself (code {member.process.returncode}); restarting")
                if all(s != seat for _, s in self.restarts):
                    self.restarts.append((time.monotonic() + 1.0, seat))

    def settle(self, timeout: float = 30.0) -> None:
        """Heal every link, join the broker thread, refill every seat, before the quiet tail."""
        deadline = time.monotonic() + timeout
        for _, heal in self.heals:
            heal()
        self.heals.clear()
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        while self.restarts and time.monotonic() < deadline:
            self.restarts = [(0.0, seat) for _, seat in self.restarts]
            self.tick()
            time.sleep(0.05)


def _backend_class(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


async def _read_history(backend_class: Any, kwargs: dict[str, Any], jobs: list[str]) -> dict[str, list[Any]]:
    backend = backend_class(**kwargs)
    await backend.start()
    try:
        return {job: await backend.history(job, limit=5000) for job in jobs}
    finally:
        await backend.close()


def run_scenario(name: str, cfg: Config, say: Callable[[str], None] = print) -> Verdict:
    broker_cls = BROKERS[name]
    root = Path(cfg.workdir or tempfile.mkdtemp(prefix="anarchon-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # initdb and the RabbitMQ node run as their own users
    workdir = root / name
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o755)
    broker = broker_cls(workdir)
    backend_cls = _backend_class(broker_cls.backend_class)
    lease = bool(backend_cls.capabilities.lease)
    loop = ProxyLoop() if broker.networked else None
    namespace = f"chaos{cfg.seed}x{int(time.time()) % 100000}"
    plan = make_plan(
        cfg.seed,
        seconds=cfg.seconds,
        instances=cfg.instances,
        networked=broker.networked,
        restartable=broker.restartable,
        short=cfg.short,
        lease_ms=cfg.lease_ms,
    )
    options: dict[str, Any] = {"jitter_ms": cfg.jitter_ms, "max_late_ms": cfg.max_late_ms}
    if lease:
        options["lease_ms"] = cfg.lease_ms
    timeline = Timeline()
    started = time.monotonic()
    try:
        broker.start()
        say(f"[{name}] broker up ({broker.describe()}, port {broker.port or '-'}); {len(plan)} faults planned")
        proxies = [loop.proxy(broker.port) for _ in range(cfg.instances)] if loop else []
        seat_kwargs = (
            [broker.backend_kwargs(p.port, namespace) for p in proxies]
            if proxies
            else [broker.backend_kwargs(0, namespace)] * cfg.instances
        )
        fleet = ChaosFleet(
            workdir / "fleet",
            backend_class=broker_cls.backend_class,
            seat_kwargs=seat_kwargs,
            seat_skews_ms=cfg.seat_skews(),
            jobs=cfg.jobs,
            options=options,
            slow_cron=cfg.slow_cron,
            slow_seconds=cfg.slow_seconds,
            slow_options=options,
            grace_ms=cfg.grace_ms,
        )
        with fleet:
            tail = LedgerTail(fleet.ledger_path)
            harness = _Harness(fleet, broker, proxies, tail, timeline, lambda m: say(f"[{name}] {m}"))
            harness.slow_cron = cfg.slow_cron
            harness.broker_up.set()
            fleet.start(timeout=60)
            t0 = time.monotonic()
            say(f"[{name}] {cfg.instances} instances ready; running {cfg.seconds:.0f} s")
            pending = list(plan)
            while time.monotonic() - t0 < cfg.seconds:
                elapsed = time.monotonic() - t0
                while pending and pending[0].at_s <= elapsed:
                    fault = pending.pop(0)
                    timeline.planned(fault)
                    if fault.targeted or fault.kind == "holdall":
                        harness.armed.append((time.monotonic() + 8.0, fault))
                    elif not harness.strike(fault):
                        harness.armed.append((time.monotonic() + 3.0, fault))
                harness.tick()
                time.sleep(0.02)
            harness.settle()
            time.sleep(1.0)
            fleet.stop(timeout=30)
            timeline.stopped_ms = fleet.stopping_ms or _now_ms()
            for member in fleet.members:
                if not timeline.ended(member.instance):
                    timeline.instance_ended(member.instance, timeline.stopped_ms, "final stop")
            ledger = fleet.ledger()
            expected = fleet.expected((fleet.ready_ms or 0) + 2000, timeline.stopped_ms - 3000)
            direct = broker.backend_kwargs(broker.port, namespace)
            history = asyncio.run(_read_history(backend_cls, direct, fleet.job_names()))
        verdict = judge(
            backend=name,
            lease=lease,
            ledger=ledger,
            expected=expected,
            history=history,
            timeline=timeline,
            options=options,
            slow_job=SLOW_JOB,
            persistent=broker.persistent,
            instances=cfg.instances,
            jobs=cfg.jobs,
            rules_only=cfg.rules_only,
        )
        verdict.seconds = round(time.monotonic() - started, 1)
        verdict.notes.append(f"broker: {broker.describe()}; {broker.persistence_note}")
        verdict.plan = [f.describe() for f in plan]
        verdict.workdir = str(workdir)
        return verdict
    finally:
        if loop is not None:
            loop.close()
        broker.stop()
