"""The seeded fault plan: which fault, when, on which seat, for how long.

The same seed gives the same plan, so a failing run can be repeated (the
timing of the instances themselves still varies). Faults are spread over the
run in equal buckets, one per bucket at a random point, so they overlap
sometimes but not always; the first seconds and the last are left quiet, so
the fleet is settled when faults start and every fault is over before the
fleet stops.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Fault", "make_plan"]


@dataclass
class Fault:
    at_s: float
    kind: str
    seat: int | None = None
    duration_s: float = 0.0
    #: Wait until this seat's instance runs the slow job (up to a few seconds), then strike.
    targeted: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        where = "slow job's runner" if self.targeted else (f"seat {self.seat}" if self.seat is not None else "broker")
        extra = "".join(f", {k}={v}" for k, v in self.detail.items())
        return f"+{self.at_s:5.1f}s {self.kind:<11} {where} for {self.duration_s:.1f}s{extra}"


def make_plan(
    seed: int,
    *,
    seconds: float,
    instances: int,
    networked: bool,
    restartable: bool,
    short: bool,
    lease_ms: int,
) -> list[Fault]:
    rng = random.Random(seed)
    scale = max(1.0, seconds / 60)
    kinds: list[str] = []
    if short:
        kinds += ["kill9", "kill9-slow", "term-slow"]
        kinds += ["drop", "hold"] if networked else ["lockstall"]
    else:
        kinds += ["kill9", "kill9", "kill9-slow", "kill9-slow", "term-slow"]
        kinds += ["drop", "drop", "hold", "hold", "hold-slow", "slow"] if networked else ["lockstall"] * 3
        if networked:
            kinds.append("holdall")
        kinds = kinds * int(scale)
    rng.shuffle(kinds)
    if restartable:
        kinds.insert(len(kinds) // 2, "restart")  # mid-run, with faults on both sides
    warm, tail = (3.0, 6.0) if short else (4.0, 8.0)
    span = seconds - warm - tail
    bucket = span / len(kinds)
    plan: list[Fault] = []
    for i, kind in enumerate(kinds):
        at = round(warm + i * bucket + rng.uniform(0, bucket * 0.8), 2)
        seat = rng.randrange(instances)
        if kind in ("kill9", "kill9-slow"):
            plan.append(Fault(at, "kill9", seat, rng.uniform(2.0, 4.0), targeted=kind.endswith("slow")))
        elif kind == "term-slow":
            plan.append(Fault(at, "term", seat, 2.0, targeted=True))
        elif kind == "drop":
            plan.append(Fault(at, "drop", seat, rng.uniform(1.5, 4.0)))
        elif kind in ("hold", "hold-slow"):
            # Only broker→client: the claim (or renewal) reaches the broker, its answer does not.
            then = rng.choice(["release", "drop"])
            length = lease_ms / 1000 + rng.uniform(0.5, 2.0)
            plan.append(Fault(at, "hold", seat, length, targeted=kind.endswith("slow"), detail={"then": then}))
        elif kind == "slow":
            plan.append(Fault(at, "slow", seat, rng.uniform(3.0, 5.0), detail={"delay_ms": rng.choice([150, 300])}))
        elif kind == "holdall":
            # Every seat's answers held from just before a slow-job slot to after its lease expired:
            # the claim's winner hears of its grant only after the run was taken over.
            plan.append(Fault(at, "holdall", None, lease_ms / 1000 + 1.5, detail={"then": "release"}))
        elif kind == "restart":
            plan.append(Fault(at, "restart", None, rng.uniform(1.5, 3.0)))
        elif kind == "lockstall":
            plan.append(Fault(at, "lockstall", None, rng.uniform(1.0, 4.0)))
    return sorted(plan, key=lambda f: f.at_s)
