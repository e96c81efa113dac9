"""The ``anarchon`` command: run, inspect and check a scheduler from a shell (also ``python -m anarchon``).

One module per kind of command: :mod:`._read` (``jobs``, ``history``,
``backends``), :mod:`._check` (the readiness gate), :mod:`._run` (``run``,
``run-now``), :mod:`._backfill`, :mod:`._control` (``pause``, ``resume``, ``pauses``,
``trigger``), :mod:`._schedules` (``schedules add|set|remove|list|show|log``), :mod:`._audit`,
:mod:`._migrate`; commands of other distributions (``web``) arrive through a
plugin hook (:mod:`._external`). Built on :mod:`argparse`, so the core needs
no dependency for it; every read command takes ``--json`` for scripts.

Exit status: 0 done, 1 a check, a run or the backend failed (the reason is
printed), 2 a command line, an option or a job name that cannot work.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .. import __version__
from ..commands import CliCommand
from ..errors import AnarchonError, BackendUnavailableError
from ..health import check_health_port
from . import _audit, _control, _every, _groups, _schedules
from ._backfill import backfill, parse_moment
from ._check import check
from ._common import BACKEND_ENV, RUN_HEADERS, UsageError, load_scheduler, positive_int, run_rows, table
from ._external import missing_commands, plugin_commands
from ._fleet import fleet
from ._migrate import migrate
from ._read import backends, history, jobs
from ._run import run, run_now
from ._suggest import first_word, suggestion, unknown_options

__all__ = ["RUN_HEADERS", "UsageError", "load_scheduler", "main", "run_rows", "table"]

log = logging.getLogger("anarchon.cli")

TARGET_HELP = "the Scheduler, as module:attr (e.g. myapp.tasks:scheduler), or a function returning one"
BACKEND_HELP = (
    "use this backend URL instead of the scheduler's own, with its namespace in the query "
    "(redis://host:6379/0?prefix=billing:, postgresql://db/app?schema=billing, amqp://rabbit/?prefix=billing.); "
    f"without module:attr, {BACKEND_ENV} is the default"
)
JSON_HELP = "print JSON instead of a table, for scripts"


def _parser(
    external: dict[str, CliCommand] | None = None, missing: dict[str, str] | None = None
) -> argparse.ArgumentParser:
    if external is None:
        external = plugin_commands(set(COMMANDS))
    if missing is None:
        missing = missing_commands(external)
    # -v is accepted before and after the command: the command's copy leaves the value alone when absent.
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log at DEBUG level to stderr"
    )
    parser = argparse.ArgumentParser(
        prog="anarchon",
        description="Distributed cron: exactly one instance runs each slot.",
        parents=[verbose],
        epilog="".join(f"anarchon {name}: not installed ({hint}).  " for name, hint in missing.items())
        + "exit status: 0 done, 1 a check, run or backend failed, 2 a command line or option that cannot work",
    )
    parser.add_argument("--version", action="version", version=f"anarchon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description or help, parents=[verbose])

    def backend_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", metavar="URL", help=BACKEND_HELP)

    def json_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help=JSON_HELP)

    p = command("run", "run the scheduler as one instance of the fleet until SIGINT or SIGTERM")
    p.add_argument("target", metavar="module:attr", help=TARGET_HELP)
    backend_option(p)
    p.add_argument(
        "--grace-ms",
        type=positive_int,
        default=10_000,
        metavar="MS",
        help="on the first SIGINT/SIGTERM, how long running jobs get to finish before they are cancelled and "
        "handed over (default 10000); a second signal exits at once",
    )
    p.add_argument(
        "--health-port",
        type=_port,
        metavar="PORT",
        help="serve /healthz (the process and its loop answer) and /readyz (scheduling, backend answering, "
        "heartbeat acknowledged) on this port, for Kubernetes probes; 0 picks a free one (logged)",
    )
    p.add_argument(
        "--health-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the health endpoints listen on (default 127.0.0.1; 0.0.0.0 for a pod's probes)",
    )

    p = command(
        "jobs",
        "list jobs: name, cron, timezone, next slot in UTC and in the job's zone, last status",
        "List jobs: name, cron, timezone, next slot, last status, paused. With module:attr, the scheduler's "
        f"jobs; with only --backend URL (or {BACKEND_ENV}), the jobs the live fleet defines, from the fleet "
        "registry, with how many instances define each and how many distinct definitions they hold.",
    )
    p.add_argument("target", metavar="module:attr", nargs="?", help=TARGET_HELP + " (optional with --backend)")
    backend_option(p)
    json_option(p)

    p = command(
        "fleet",
        "list the live instances from the backend: id, host, pid, version, started, last seen, jobs",
        "List the live instances of the fleet from the backend's fleet registry: id, host, pid, application "
        "version, start time, when the backend last heard of it, its number of jobs and its drift policy.",
    )
    backend_option(p)
    json_option(p)

    p = command(
        "history",
        "show what became of a job's slots, newest first",
        "Show what became of a job's slots, newest first: ran, failed, skipped (overlap, paused), missed (due, "
        "nobody claimed it), lost (its runner died, nobody took it over), and each attempt that died before a "
        "take-over. With module:attr the job must be one of the scheduler's; with only "
        f"--backend URL (or {BACKEND_ENV}) any job name is read, e.g. one removed from the code.",
    )
    p.add_argument("target", metavar="module:attr", nargs="?", help=TARGET_HELP + " (optional with --backend)")
    p.add_argument("job", metavar="JOB", help="the job's name")
    backend_option(p)
    p.add_argument(
        "--limit",
        type=positive_int,
        default=20,
        metavar="N",
        help="read the newest N runs and show the newest N lines of the ledger (default 20)",
    )
    json_option(p)
    p.add_argument(
        "--ledger",
        action="store_true",
        help="with --json: print the ledger's entries (outcome, reason, covered_by…), not the stored runs",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with only --backend: read a job that has no runs and no live instance defines (otherwise refused "
        "as a likely typo)",
    )

    p = command(
        "run-now",
        "run a job once now, in this process",
        "Run a job once now, in this process, through the backend (recorded as manual) and print the run. "
        "This process is the instance that runs it, with this shell's environment: the running fleet is not "
        "asked to (for that, use 'anarchon trigger'). Exits 1 when the run did not succeed.",
    )
    p.add_argument("target", metavar="module:attr", help=TARGET_HELP)
    p.add_argument("job", metavar="JOB", help="the job's name")
    backend_option(p)
    json_option(p)

    p = command(
        "backfill",
        "run the past slots of a range that have not run, once across the fleet, in this process",
        "Run every slot of JOB from --from to --to (both included) that has no record in the job's history, "
        "in this process, while the fleet runs on. Each slot is decided by the backend, so a slot runs once "
        "however many backfills of overlapping ranges and live instances race for it. Times without a zone "
        "are the job's timezone. Lease backends only (Redis, PostgreSQL, SQLite); claim-tier backends keep no "
        "record to tell which slots ran and are refused. Prints a summary (ran, already run, skipped, failed); "
        "exits 1 when a slot failed or was not decided. A progress bar needs rich (pip install "
        "anarchon-core[progress]); without it a line per tenth of the range goes to stderr.",
    )
    p.add_argument("target", metavar="module:attr", help=TARGET_HELP + " (it holds the job's function)")
    p.add_argument("job", metavar="JOB", help="the job's name")
    p.add_argument(
        "--from",
        dest="start",
        required=True,
        type=parse_moment,
        metavar="T1",
        help="first time of the range, ISO 8601 (2026-11-30T02:00 in the job's zone, or 2026-11-30T01:00Z)",
    )
    p.add_argument(
        "--to",
        dest="end",
        required=True,
        type=parse_moment,
        metavar="T2",
        help="last time of the range, at or before now",
    )
    p.add_argument(
        "--concurrency", type=positive_int, default=1, metavar="N", help="run up to N slots at once (default 1)"
    )
    p.add_argument("--dry-run", action="store_true", help="list the slots that would run; change nothing")
    p.add_argument("--yes", action="store_true", help="run a range of more than 1000 slots without asking")
    p.add_argument("--reason", metavar="TEXT", help=_control.REASON_HELP)
    backend_option(p)
    json_option(p)

    p = command(
        "check",
        "readiness gate: check the options, connect, check the clock skew, report what the referee promises",
        "Check every job's options against the backend, connect to it (read-only), check this host's "
        "clock skew against it and print what the referee as configured promises across a failover or a "
        "restart (a WARN line names each setting that can run a slot twice, with its fix). Exits 1 with the "
        "reason when a check fails, so it can serve as a Kubernetes readiness probe or a deploy gate.",
    )
    p.add_argument("target", metavar="module:attr", nargs="?", help=TARGET_HELP + " (optional with --backend)")
    backend_option(p)
    p.add_argument("--offline", action="store_true", help="check the options only, without connecting")
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail when the referee as configured cannot promise one run per slot across a failover or a restart",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="fail when the backend has not answered within this (default 10)",
    )
    json_option(p)

    p = command(
        "migrate",
        "create or upgrade the backend's schema (PostgreSQL), or print its SQL",
        "Create or upgrade the backend's schema to this release's version ahead of a deploy, or with --sql "
        "print the SQL for a DBA without changing anything. Backends without a schema have nothing to do.",
    )
    p.add_argument("target", metavar="module:attr", nargs="?", help=TARGET_HELP + " (optional with --backend)")
    backend_option(p)
    p.add_argument("--sql", action="store_true", help="print the SQL that would be applied; change nothing")

    def backend_and_json(p: argparse.ArgumentParser) -> None:
        backend_option(p)
        json_option(p)

    _control.register(command, TARGET_HELP, backend_and_json)
    _schedules.register(command, backend_and_json)
    _audit.register(command, backend_and_json)
    _groups.register(command, backend_and_json)
    _every.register(command, backend_and_json)

    p = command("backends", "list installed backends: schemes, kind (lease or claim), capabilities")
    json_option(p)
    for name, plugin in sorted(external.items()):
        # Listed for --help and suggestions only: main() hands its arguments to the plugin unparsed.
        sub.add_parser(name, help=f"{plugin.help} (anarchon {name} --help)", add_help=False)
    return parser


def _port(text: str) -> int:
    try:
        return check_health_port(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port from 0 to 65535 (0: a free one)") from None


COMMANDS: dict[str, Callable[[argparse.Namespace], Any]] = {
    "run": run,
    "jobs": jobs,
    "fleet": fleet,
    "history": history,
    "run-now": run_now,
    "backfill": backfill,
    "check": check,
    "migrate": migrate,
    "backends": backends,
    **_control.COMMANDS,
    **_schedules.COMMANDS,
    **_audit.COMMANDS,
    **_groups.COMMANDS,
    **_every.COMMANDS,
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    external = plugin_commands(set(COMMANDS))
    missing = missing_commands(external)
    at = first_word(args_list)
    if at is not None:
        word = args_list[at]
        if word in external:
            return int(external[word].main(args_list[at + 1 :], f"anarchon {word}"))
        if word in missing:
            print(f"anarchon: error: 'anarchon {word}' is not installed: {missing[word]}", file=sys.stderr)
            return 2
        if word not in COMMANDS:
            hint = suggestion(word, [*COMMANDS, *external])
            print(f"anarchon: error: unknown command {word!r}{hint} (anarchon --help lists them)", file=sys.stderr)
            return 2
    parser = _parser(external, missing)
    args, extras = parser.parse_known_args(args_list)
    if extras:
        (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        command_parser = commands.choices[args.command]
        command_parser.error(unknown_options(command_parser, extras))
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    log.debug("anarchon %s: %s", __version__, args.command)
    try:
        outcome = COMMANDS[args.command](args)
        return int(asyncio.run(outcome) if asyncio.iscoroutine(outcome) else outcome)
    except KeyboardInterrupt:
        return 130
    except (AnarchonError, ValueError, TypeError, LookupError, OSError) as exc:
        log.debug("the command failed", exc_info=True)  # -v shows where
        print(f"anarchon: error: {exc}", file=sys.stderr)
        usage = isinstance(exc, (AnarchonError, ValueError, TypeError)) and not isinstance(exc, BackendUnavailableError)
        return 2 if usage else 1
