"""``anarchon check``: a readiness and deploy gate.

It connects by default (``--offline`` leaves the connection out), because a
check that cannot fail when the backend is down is no gate. In order, each
printed on its own line:

1. **options**: every job's options against the backend (done when the
   scheduler is loaded; a bad option exits 2 with the fix);
2. **connect**: the backend opened read-only, within ``--timeout``;
3. **clock**: on a backend with a clock of its own, the scheduler's clock's
   skew from it (this host's, unless the scheduler was given another),
   which must stay within a quarter of the smallest ``max_late_ms`` (the
   scheduler's own warning threshold);
4. **schema**: a note when ``start()`` would still create or migrate the
   backend's schema (PostgreSQL), which ``anarchon migrate`` does ahead;
5. **guarantee**: what the referee as configured promises across a failover
   or a restart (:mod:`anarchon.guarantees`), one line a finding. A finding
   that is not ok is a WARNING with its fix; ``--strict`` makes it fail the
   check, for a deploy gate that refuses a referee that can run a slot twice.

Exit 0 when every check passed, 1 when one failed (the reason is printed),
2 for a command line or configuration that cannot work.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from dataclasses import asdict, dataclass

from ..backend import Backend
from ..clock import Clock, SystemClock
from ..guarantees import read_guarantees
from ..options import JobOptions
from ..scheduler import Scheduler
from ._common import print_json, reading, resolve

__all__ = ["check"]

log = logging.getLogger("anarchon.cli")


@dataclass
class Result:
    check: str
    ok: bool
    detail: str
    #: A finding that is not ok but does not fail the check (``--strict`` turns it into a failure).
    warning: bool = False


def _skew_limit_ms(scheduler: Scheduler | None) -> int:
    """A quarter of the smallest ``max_late_ms``: where the scheduler starts warning about skew."""
    lates = [j.options.max_late_ms for j in scheduler.jobs.values()] if scheduler else []
    return min(lates or [JobOptions().max_late_ms]) // 4


async def _probe(backend: Backend, clock: Clock, limit_ms: int, strict: bool, results: list[Result]) -> None:
    began = time.monotonic()
    async with reading(backend):
        results.append(Result("connect", True, f"{backend!r} answered in {(time.monotonic() - began) * 1000:.0f} ms"))
        if backend.capabilities.server_clock:
            sent = clock.now_ms()
            remote = await backend.now_ms()
            skew = (sent + clock.now_ms()) // 2 - remote
            results.append(
                Result(
                    "clock",
                    abs(skew) <= limit_ms,
                    f"this host is {skew:+d} ms off the backend's clock (limit ±{limit_ms} ms, a quarter of "
                    "max_late_ms)" + ("" if abs(skew) <= limit_ms else "; synchronise the clock (NTP)"),
                )
            )
        else:
            results.append(Result("clock", True, "the backend has no clock of its own: leases use this host's"))
        for f in await read_guarantees(backend):
            results.append(Result("guarantee", f.ok or not strict, f.line(), warning=not f.ok and not strict))
        if getattr(backend, "needs_migration", False):
            results.append(
                Result(
                    "schema",
                    True,
                    "not at this release's version yet: start() will create or migrate it, "
                    "or run `anarchon migrate` (--sql to see the SQL) ahead of the deploy",
                )
            )


async def check(args: argparse.Namespace) -> int:
    scheduler, backend = resolve(args.target, args.backend)
    results = []
    if scheduler is not None:
        results.append(
            Result(
                "options",
                True,
                f"{len(scheduler.jobs)} job(s) checked against backend {backend.name!r}: all options valid",
            )
        )
    if not args.offline:
        try:
            clock = scheduler.clock if scheduler is not None else SystemClock()
            probe = _probe(backend, clock, _skew_limit_ms(scheduler), args.strict, results)
            await asyncio.wait_for(probe, args.timeout)
        except asyncio.TimeoutError:
            results.append(Result("connect", False, f"{backend!r} did not answer within {args.timeout:g} s"))
        except Exception as exc:
            log.debug("check: the probe failed", exc_info=True)
            results.append(Result("connect", False, f"{type(exc).__name__}: {exc}"))
    ok = all(r.ok for r in results)
    if args.json:
        print_json({"ok": ok, "checks": [asdict(r) for r in results]})
    else:
        for r in results:
            print(f"{'FAILED' if not r.ok else 'WARN' if r.warning else 'ok':6} {r.check}: {r.detail}")
    return 0 if ok else 1
