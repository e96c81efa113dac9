"""``anarchon-web``: serve the dashboard with uvicorn.

    anarchon-web myapp.tasks:scheduler [--host 127.0.0.1] [--port 8000]
    anarchon-web --backend redis://cache:6379/0
    anarchon-web --backend sqlite:///jobs.db --job 'sync=*/5 * * * *' --job 'report=0 2 * * *@Europe/Athens'

The first reads the jobs from the application's scheduler. The second needs
only the backend: on one with the fleet registry (``anarchon backends``
lists the capability ``registry``) it shows the jobs the live fleet defines
and the live instances (``/fleet``). The third names each job's cron, for a
backend without the registry. Either way the dashboard opens its own
connection to the backend.

Without sign-in it is read-only and binds localhost only (``--insecure-no-auth``
to bind elsewhere). With sign-in (``ANARCHON_WEB_TOKEN``, ``--token-file`` or
``--trusted-header``) every page needs it and signed-in users can steer:
pause, resume, trigger, stored schedules, and, with ``module:attr`` (whose
functions this process then runs), backfill and run now.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from anarchon import AnarchonError, Scheduler

from ._app import app
from ._auth import DEFAULT_USER
from ._load import UsageError, add_jobs, load_scheduler

__all__ = ["allowed_hosts", "build", "main", "parser", "sign_in"]

log = logging.getLogger("anarchon.web")


def parser(prog: str = "anarchon-web") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Serve a web dashboard of an anarchon fleet's schedule.")
    p.add_argument("target", nargs="?", metavar="module:attr", help="the Scheduler, e.g. myapp.tasks:scheduler")
    p.add_argument("--backend", metavar="URL", help="read this backend (instead of the scheduler's own)")
    p.add_argument("--job", action="append", default=[], metavar="NAME=CRON[@ZONE]", help="a job to show (repeat)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; others need sign-in or --insecure-no-auth)",
    )
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--title", default="anarchon", help="the name at the top of every page")
    steer = p.add_mutually_exclusive_group()
    steer.add_argument("--actions", action="store_true", default=None,
                       help="steering forms: pause, resume, trigger, backfill, schedules (the default with sign-in; "
                       "needs it)")  # fmt: skip
    steer.add_argument("--read-only", dest="actions", action="store_false", help="no steering, even with sign-in")
    p.add_argument("--token-file", metavar="PATH",
                   help="sign in with the token this file holds (or set ANARCHON_WEB_TOKEN)")  # fmt: skip
    p.add_argument("--trusted-header", metavar="NAME",
                   help="sign in the user this header names (e.g. X-Forwarded-User); only your own proxy may be "
                   "able to set it")  # fmt: skip
    p.add_argument("--token-user", default=DEFAULT_USER, metavar="NAME",
                   help="the name token users are recorded by (default 'token')")  # fmt: skip
    p.add_argument("--origin", action="append", default=[], metavar="URL",
                   help="an origin POSTs may come from, e.g. https://cron.example.com (repeat)")  # fmt: skip
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="serve the read-only pages without sign-in on an address other than localhost")  # fmt: skip
    p.add_argument("--refresh-s", type=int, default=5, metavar="SECONDS",
                   help="seconds between the live refreshes of the jobs and job pages (default 5; 0: off)")  # fmt: skip
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the dashboard answers besides the address it binds and localhost (repeat; "
        "'*.example.com' for a domain); any other Host gets 400, against DNS rebinding",
    )
    return p


def allowed_hosts(host: str, extra: Sequence[str]) -> list[str]:
    """The Host names answered: the bound address (this host's names when it binds every address),
    localhost, and ``--allowed-host``."""
    names = {"localhost", "127.0.0.1", "[::1]", *extra}  # an IPv6 Host keeps its brackets
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - the names of a dashboard bound to every address
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    elif ":" in host:
        names.add(f"[{host.lower().strip('[]')}]")
    else:
        names.add(host.lower())
    return sorted(names)


LOCALHOST = ("127.0.0.1", "localhost", "::1", "[::1]")


def sign_in(args: argparse.Namespace) -> dict[str, Any]:
    """The sign-in keywords of ``app()``; without sign-in, binding beyond localhost needs ``--insecure-no-auth``."""
    token = os.environ.get("ANARCHON_WEB_TOKEN") or None
    if token is not None and args.token_file:
        raise UsageError("give the token once: ANARCHON_WEB_TOKEN is set and --token-file is given; unset one")
    if token is None and not args.token_file and not args.trusted_header:
        if args.actions:
            raise UsageError("--actions lets users pause, trigger and backfill jobs, so it needs sign-in: set "
                             "ANARCHON_WEB_TOKEN, or give --token-file PATH or --trusted-header NAME")  # fmt: skip
        if args.host.lower() not in LOCALHOST:
            if not args.insecure_no_auth:
                raise UsageError(
                    f"--host {args.host} serves the dashboard beyond this machine with no sign-in: set "
                    "ANARCHON_WEB_TOKEN, or give --token-file PATH or --trusted-header NAME; or bind 127.0.0.1; "
                    "or, to show the read-only pages to anyone who can reach it, --insecure-no-auth"
                )
            log.warning(
                "!!! INSECURE: --insecure-no-auth: the dashboard on %s shows every job and its history to anyone "
                "who can reach that address, with no sign-in !!!",
                args.host,
            )
        return {}
    return {"token": token, "token_file": args.token_file, "trusted_header": args.trusted_header,
            "token_user": args.token_user, "origins": args.origin or None}  # fmt: skip


def build(args: argparse.Namespace) -> tuple[Scheduler, str | None]:
    """The scheduler to show, from parsed arguments, with every check done before anything listens.

    With ``--backend`` alone the scheduler has no job: the dashboard reads them from the fleet registry.
    """
    if args.backend and not args.target and not args.job:
        scheduler = Scheduler(args.backend)
        if not scheduler.backend.capabilities.registry:
            raise UsageError(
                f"--backend alone names no job: backend {scheduler.backend.name!r} keeps no fleet registry to "
                "read them from; add --job NAME=CRON for each job, or give module:attr"
            )
        return scheduler, args.backend
    if args.target:
        scheduler = load_scheduler(args.target)
        if args.backend:
            scheduler.use_backend(args.backend)
    elif args.backend:
        if not args.job:
            raise UsageError("--backend alone names no job: add --job NAME=CRON for each job, or give module:attr")
        scheduler = Scheduler(args.backend)
    else:
        raise UsageError("give module:attr, or --backend URL with --job NAME=CRON")
    add_jobs(scheduler, args.job)
    if not scheduler.jobs:
        raise UsageError(f"{args.target} has no job to show; add jobs to it or name some with --job")
    return scheduler, args.backend


def main(argv: Sequence[str] | None = None, prog: str = "anarchon-web") -> int:
    """Parse, build, then serve until SIGINT or SIGTERM; 2 for a command line that cannot work.

    ``anarchon web …`` delegates here with ``main(argv_after_web, prog="anarchon web")``.
    """
    args = parser(prog).parse_args(argv)
    try:
        scheduler, url = build(args)
        from_registry = not scheduler.jobs
        signing = sign_in(args)
        dashboard = app(scheduler, actions=args.actions, title=args.title, open_backend=True, backend_url=url,
                        from_registry=from_registry, refresh_s=args.refresh_s,
                        allowed_hosts=allowed_hosts(args.host, args.allowed_host), **signing)  # fmt: skip
    except (AnarchonError, ValueError, TypeError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    host = f"[{args.host}]" if ":" in args.host else args.host
    shown = "the live fleet's jobs" if from_registry else f"{len(scheduler.jobs)} jobs"
    print(f"{prog}: {shown} on http://{host}:{args.port}/", flush=True)
    uvicorn.run(dashboard, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
