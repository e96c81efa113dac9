"""The ``failover`` scenario: the referee itself fails over while instances claim every-second slots.

Per backend, twice: with the default options and with the durable one (see
each broker's ``durable_note`` in :mod:`.replicated`). The fleet, the ledger
and the verdict are the fault suite's (:mod:`.fleet`, :mod:`.judge`); the only
fault is the failover, alternately a ``crash`` and a ``switch``. A failover's
window (from the primary's death or the promotion to the last client moved) is
passed to the judge as the broker being down, so a slot lost in it is counted,
not judged; a duplicate anywhere is one.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backends import FAILOVER_BROKERS
from .fleet import ChaosFleet
from .judge import Timeline, Verdict, judge
from .proxy import ProxyLoop
from .replicated import Replicated
from .scenario import SLOW_JOB, Config, _backend_class, _read_history

__all__ = ["FailoverResult", "run_failover"]

#: Slots this close to a failover's window count as claimed *across* it.
AROUND_MS = 2000
#: Seconds a replicated referee runs healthy (its old primary a replica again) before the next failover.
RECOVERED_S = 3.0


@dataclass
class FailoverResult:
    backend: str
    durable: bool
    note: str
    verdict: Verdict
    failovers: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, start ms, end ms)
    #: Slots run by two grants of the same attempt: two winners (the lease protocol never grants one attempt
    #: twice, and nothing here hands over), besides the judge's overlapping runs.
    second_runs: list[str] = field(default_factory=list)
    across: int = 0  # slots within AROUND_MS of a failover window that ran
    #: Slots no run started and no later run covered: unknown claims, overlap with an unconfirmed grant,
    #: abandoned, no referee; the judge's categories are in the verdict.
    lost: int = 0
    #: The run is held to "no slot runs twice": the durable option, or the defaults where no durable option exists.
    promised: bool = False

    @property
    def passed(self) -> bool:
        """A promised run has no duplicate; a default run is measured (its duplicates are the finding)."""
        return self.verdict.error is None and (not self.promised or not self.duplicates)

    @property
    def duplicates(self) -> int:
        return len(self.second_runs)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _count(result: FailoverResult, ledger: list[dict[str, Any]], expected: dict[str, list[int]]) -> None:
    starts: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in ledger:
        if r.get("e") == "start":
            starts.setdefault((r["job"], r["slot"]), []).append(r)
    judged = {d.partition(":")[0] for d in result.verdict.duplicates}
    for (job, slot), runs in sorted(starts.items()):
        # A second winner: a later start whose fencing token did not grow past an earlier one's (the
        # promoted server lacked the first grant). A take-over or a hand-over always grants a higher
        # token, even as the same attempt (a hand-over is no death; since issue 16 a run stopped in a
        # heartbeat lapse is handed over so), and the first of them was stopped before it.
        by_time = sorted(runs, key=lambda r: r["t"])
        fencings = [r.get("fencing") for r in by_time]
        grew = [isinstance(a, int) and isinstance(b, int) and b > a for a, b in itertools.pairwise(fencings)]
        regressed = not all(grew)
        if regressed or f"{job} @ {slot}" in judged:
            who = ", ".join(f"{r['instance']}#{r['attempt']}@{r['t']}" for r in sorted(runs, key=lambda r: r["t"]))
            result.second_runs.append(f"{job} @ {slot}: {who}")
    started = set(starts)
    windows = [(s - AROUND_MS, e + AROUND_MS) for _, s, e in result.failovers]
    result.across = sum(
        1 for job, slots in expected.items() for slot in slots
        if (job, slot) in started and any(a <= slot <= b for a, b in windows)
    )  # fmt: skip
    never = sum(1 for job, slots in expected.items() for slot in slots if (job, slot) not in starts)
    # Coalesced slots have no start but a later run covered them (catch-up, or a run superseding a dead one).
    result.lost = never - result.verdict.coalesced


def run_failover(
    name: str, durable: bool, cfg: Config, every_s: float, say: Callable[[str], None] = print
) -> FailoverResult:
    broker_cls = FAILOVER_BROKERS[name]
    root = Path(cfg.workdir or tempfile.mkdtemp(prefix="anarchon-failover-"))
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # the PostgreSQL and RabbitMQ nodes run as their own users
    label = f"{name}/{'durable' if durable else 'default'}"
    workdir = root / label.replace("/", "-")
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o755)
    broker: Replicated = broker_cls(workdir, durable)
    namespace = f"fo{cfg.seed}x{int(time.time()) % 100000}"
    broker.namespace = namespace
    backend_cls = _backend_class(broker_cls.backend_class)
    lease = bool(backend_cls.capabilities.lease)
    loop = ProxyLoop() if broker.proxied else None
    options: dict[str, Any] = {"jitter_ms": cfg.jitter_ms, "max_late_ms": cfg.max_late_ms}
    if lease:
        options["lease_ms"] = cfg.lease_ms
    timeline = Timeline()
    result = FailoverResult(name, durable, broker.durable_note if durable else "defaults", Verdict(name, "?"))
    result.promised = durable or not broker_cls.has_durable
    started = time.monotonic()
    try:
        broker.start()
        say(f"[{label}] up: {broker.describe()}")
        proxies = [loop.proxy(broker.port) for _ in range(cfg.instances)] if loop else []

        def retarget(port: int, seats: list[int] | None) -> None:
            for seat in range(len(proxies)) if seats is None else seats:
                proxies[seat].upstream = ("127.0.0.1", port)
                proxies[seat].cut()

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
            fleet.start(timeout=60)
            say(f"[{label}] {cfg.instances} instances ready; {cfg.seconds:.0f} s, a failover every {every_s:.0f} s")
            t0 = time.monotonic()
            done = threading.Event()
            done.set()
            errors: list[BaseException] = []

            def fail_over(kind: str) -> None:
                try:
                    start, end = broker.failover(kind, retarget, cfg.instances)
                    result.failovers.append((kind, start, end))
                    timeline.broker.append((start, end, f"failover ({kind})"))
                    timeline.event(f"failover-{kind}", start, None, broker.describe())
                    say(
                        f"[{label}] failover ({kind}): {end - start} ms until every client was moved, "
                        f"{_now_ms() - start} ms until the old primary was a replica again"
                    )
                except BaseException as exc:  # reported after the run, never lost in the thread
                    errors.append(exc)
                finally:
                    recovered.append(time.monotonic())
                    done.set()

            count = 0
            next_at = 4.0
            recovered: list[float] = []  # when each failover's old primary was a replica again (monotonic)
            restarts: list[tuple[float, int]] = []
            while time.monotonic() - t0 < cfg.seconds:
                elapsed = time.monotonic() - t0
                # Each failover starts from a healthy pair: RECOVERED_S after the previous one's replica is back.
                healthy = not recovered or time.monotonic() - recovered[-1] >= RECOVERED_S
                if done.is_set() and healthy and elapsed >= next_at and elapsed < cfg.seconds - 6:
                    kind = broker.kinds[count % len(broker.kinds)]
                    count += 1
                    next_at = elapsed + every_s
                    done.clear()
                    threading.Thread(target=fail_over, args=(kind,), daemon=True).start()
                for seat, member in list(fleet.occupant.items()):  # start() failed during a failover
                    if member.process.poll() is not None and not timeline.ended(member.instance):
                        timeline.instance_ended(member.instance, _now_ms(), "exited")
                        restarts.append((time.monotonic() + 1.0, seat))
                for due, seat in [r for r in restarts if r[0] <= time.monotonic() and done.is_set()]:
                    restarts.remove((due, seat))
                    fleet.spawn_on(seat)
                time.sleep(0.05)
            done.wait(120)
            if errors:
                raise errors[0]
            time.sleep(1.0)
            fleet.stop(timeout=30)
            timeline.stopped_ms = fleet.stopping_ms or _now_ms()
            for member in fleet.members:
                if not timeline.ended(member.instance):
                    timeline.instance_ended(member.instance, timeline.stopped_ms, "final stop")
            ledger = fleet.ledger()
            expected = fleet.expected((fleet.ready_ms or 0) + 2000, timeline.stopped_ms - 3000)
            history = asyncio.run(_read_history(backend_cls, broker.history_kwargs(namespace), fleet.job_names()))
        result.verdict = judge(
            backend=name, lease=lease, ledger=ledger, expected=expected, history=history, timeline=timeline,
            options=options, slow_job=SLOW_JOB, persistent=True, instances=cfg.instances, jobs=cfg.jobs,
            rules_only=cfg.rules_only,
        )  # fmt: skip
        _count(result, ledger, expected)
        result.verdict.notes.append(f"{broker.describe()}; {broker.persistence_note}")
        result.verdict.workdir = str(workdir)
    except Exception as exc:
        result.verdict.error = f"{type(exc).__name__}: {exc}"
    finally:
        if loop is not None:
            loop.close()
        broker.stop()
    result.verdict.seconds = round(time.monotonic() - started, 1)
    return result
