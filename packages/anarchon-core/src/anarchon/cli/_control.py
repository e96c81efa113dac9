"""``anarchon pause``, ``resume``, ``pauses`` and ``trigger``: steering the running fleet from a shell.

Each writes to the backend and returns; every instance acts on its control
poll (about twice a second). With ``module:attr`` the job must be one of the
scheduler's; with only ``--backend URL`` (or ``ANARCHON_BACKEND``) any job
name is accepted, so an operator needs no copy of the application.
``trigger`` differs from ``run-now``: the fleet runs the job (one live
instance that has it), not this process, and ``--wait`` prints that run.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Callable
from datetime import datetime

from .._identity import default_actor
from .._steer import TriggerTimeoutError
from ..control import PauseState
from ..errors import JobNotFoundError
from ..options import check_job_name
from ..run import RunStatus, ms_to_datetime
from ..scheduler import Scheduler
from ._common import BACKEND_ENV, print_json, print_runs, reading, resolve, table, utc
from ._fleet import check_known

__all__ = ["COMMANDS", "register"]

#: ``--reason`` of the commands that change what the fleet does; ``by`` is this shell's ``user@host``.
REASON_HELP = "why, recorded in the audit trail with user@host (see 'anarchon audit')"

#: ``command(name, help, description=None)`` of the parser being built.
Command = Callable[..., argparse.ArgumentParser]


def register(command: Command, target_help: str, options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the four commands; ``options`` adds ``--backend`` and ``--json``."""
    fleet = (
        f" With module:attr the job must be one of its jobs; with only --backend URL (or {BACKEND_ENV}) a job "
        "that a live instance defines (read from the fleet registry; --force for any name). Needs a backend "
        "with the capability it names (Redis, PostgreSQL, SQLite; "
        "`anarchon backends` lists each one's); the others refuse it."
    )
    p = command(
        "pause",
        "pause a job on every instance of the fleet; the pause survives restarts",
        "Pause a job on every instance: each stops claiming its slots at its next control poll (within about "
        "0.6 s), and records them 'paused' in history. The pause is stored in the backend, so it survives "
        "restarts of every instance. Runs already going finish; run-now and trigger still run the job."
        + fleet.replace("capability it names", "capability 'pause'"),
    )
    _job_arguments(p, target_help, options)
    p.add_argument(
        "--reason", metavar="TEXT", help="why, shown by 'anarchon pauses', stored with the pause and in the audit trail"
    )

    p = command(
        "resume",
        "end a job's pause on every instance",
        "End a job's pause. Slots due during the pause stay paused: resuming runs none of them (a catch-up "
        "after an outage skips them too); the next slot runs as usual."
        + fleet.replace("capability it names", "capability 'pause'"),
    )
    _job_arguments(p, target_help, options)
    p.add_argument("--reason", metavar="TEXT", help=REASON_HELP)

    p = command("pauses", "list the jobs paused (and pauses that ended) in the backend")
    p.add_argument("target", metavar="module:attr", nargs="?", help=target_help + " (optional with --backend)")
    options(p)

    p = command(
        "trigger",
        "ask the fleet to run a job once now (one live instance runs it)",
        "Ask the fleet to run a job once now: the request is stored in the backend, the first instance with "
        "the job to poll (within about 0.6 s) claims it as a manual run, and exactly one instance runs it. "
        "Unlike run-now, this process does not run the job (it needs neither the job's code nor its "
        "environment). A request no instance takes within 5 minutes is dropped. With --wait, prints the "
        "finished run and exits 1 unless it succeeded." + fleet.replace("capability it names", "capability 'trigger'"),
    )
    _job_arguments(p, target_help, options)
    p.add_argument("--reason", metavar="TEXT", help=REASON_HELP)
    p.add_argument("--wait", action="store_true", help="wait for the run to finish and print it")
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="with --wait, give up (exit 1) after this long (default 60)",
    )


def _job_arguments(
    p: argparse.ArgumentParser, target_help: str, options: Callable[[argparse.ArgumentParser], None]
) -> None:
    p.add_argument("target", metavar="module:attr", nargs="?", help=target_help + " (optional with --backend)")
    p.add_argument("job", metavar="JOB", help="the job's name")
    options(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="with only --backend: act even though no live instance defines the job (checked in the fleet "
        "registry, so a mistyped name is refused)",
    )


async def _scheduler(args: argparse.Namespace) -> Scheduler:
    """The named scheduler (the job must be one of its), or a bare one on the backend URL.

    With only the URL, a job no live instance defines is refused (the fleet
    registry; ``--force`` skips the check), so a mistyped name is not stored.
    """
    scheduler, backend = resolve(args.target, args.backend)
    job = getattr(args, "job", None)
    if job is not None:
        check_job_name(job)
    if scheduler is None:
        if job is not None and not getattr(args, "force", False) and backend.capabilities.registry:
            async with reading(backend):
                paused = {p.job for p in await backend.pauses()} if args.command == "resume" else set()
                await check_known(backend, job, also=paused)
        return Scheduler(backend, instance_id=f"cli-{socket.gethostname()}")
    if job is not None and job not in scheduler.jobs:
        known = ", ".join(sorted(scheduler.jobs)) or "none"
        raise JobNotFoundError(
            f"no job named {job!r} in {args.target}; its jobs: {known} "
            "(for a job no longer in the code, give only --backend URL and the job's name)"
        )
    return scheduler


def _print_pauses(states: list[PauseState], as_json: bool) -> None:
    if as_json:
        print_json([s.to_dict() for s in states])
        return
    rows = [
        [s.job, "paused" if s.paused else "resumed", utc(_moment(s.since_ms)), utc(_moment(s.until_ms)), s.by, s.reason]
        for s in states
    ]
    print(table(["job", "state", "since (UTC)", "until (UTC)", "by", "reason"], rows) if rows else "no pauses")


def _moment(ms: int | None) -> datetime | None:
    return ms_to_datetime(ms) if ms is not None else None


async def pause(args: argparse.Namespace) -> int:
    state = await (await _scheduler(args)).pause(args.job, reason=args.reason, by=default_actor())
    _print_pauses([state], args.json)
    return 0


async def resume(args: argparse.Namespace) -> int:
    state = await (await _scheduler(args)).resume(args.job, reason=args.reason, by=default_actor())
    if state is None and not args.json:
        print(f"{args.job} was not paused")
        return 0
    _print_pauses([state] if state is not None else [], args.json)
    return 0


async def pauses(args: argparse.Namespace) -> int:
    # A look, so read-only: listing pauses never creates or migrates a schema (PostgreSQL).
    _, backend = resolve(args.target, args.backend)
    async with reading(backend):
        states = await backend.pauses()
    _print_pauses(states, args.json)
    return 0


async def trigger(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise ValueError(f"--timeout {args.timeout:g} must be positive (seconds to wait for the run)")
    scheduler = await _scheduler(args)
    request = await scheduler.trigger(args.job, reason=args.reason, by=default_actor())
    if not args.wait:
        if args.json:
            print_json({"job": request.job, "slot_ms": request.slot_ms, "by": request.by})
        else:
            print(f"requested a run of {request.job} (manual slot {request.slot_ms}); see: anarchon history")
        return 0
    try:
        run = await scheduler.trigger_result(request, timeout_s=args.timeout)
    except TriggerTimeoutError as exc:  # the command line was fine: the fleet did not answer
        print(f"anarchon: error: {exc}", file=sys.stderr)
        return 1
    print_runs([run], args.json)
    return 0 if run.status is RunStatus.SUCCEEDED else 1


COMMANDS = {"pause": pause, "resume": resume, "pauses": pauses, "trigger": trigger}
