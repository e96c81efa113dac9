"""What every command shares: finding the scheduler or the backend, opening it to read, printing.

A command names a :class:`~anarchon.Scheduler` as ``module:attr`` (as uvicorn
and celery do), or, where it only reads, just a backend: ``--backend URL`` or
``ANARCHON_BACKEND``. Read-only commands open the backend with its
``start_read_only()`` where it has one (PostgreSQL: no schema created or
migrated), else with ``start()``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from ..backend import Backend
from ..errors import AnarchonError
from ..plugins import PluginManager
from ..run import Run
from ..scheduler import Scheduler

__all__ = ["BACKEND_ENV", "UsageError", "iso", "load_scheduler", "positive_int", "reading", "resolve", "table", "utc"]

#: The variable ``Scheduler(backend=None)`` reads; named here too, since the core's own constant
#: moves between modules while the scheduler is split up (issue 14).
BACKEND_ENV = "ANARCHON_BACKEND"


class UsageError(AnarchonError):
    """A command line that cannot work; the message says how to fix it."""


def load_scheduler(target: str, backend: str | None = None) -> Scheduler:
    """Import ``module:attr`` (a Scheduler, or a function returning one) and point it at ``backend``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{target!r} is not module:attr; for example myapp.tasks:scheduler")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(
                f"cannot import {module_name!r}: run from the folder that holds it, or fix PYTHONPATH"
            ) from exc
        raise
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{module_name!r} has no attribute {attr!r}") from None
    if not isinstance(obj, Scheduler) and callable(obj):
        obj = obj()
    if not isinstance(obj, Scheduler):
        raise UsageError(f"{target} is a {type(obj).__name__}, not an anarchon Scheduler")
    if backend:
        obj.use_backend(backend)
    return obj


def resolve(target: str | None, backend: str | None) -> tuple[Scheduler | None, Backend]:
    """The scheduler (when ``module:attr`` is given) and the backend a command works on."""
    if target:
        scheduler = load_scheduler(target, backend)
        return scheduler, scheduler.backend
    url = backend or os.environ.get(BACKEND_ENV)
    if not url:
        raise UsageError(f"name the scheduler (module:attr), or the backend with --backend URL or {BACKEND_ENV}")
    return None, PluginManager().backend_from_url(url)


@contextlib.asynccontextmanager
async def reading(backend: Backend) -> AsyncIterator[Backend]:
    """The backend opened for reading only, closed afterwards.

    ``start_read_only()`` is not part of :class:`~anarchon.Backend` yet; a
    backend that has it (PostgreSQL) connects without creating anything.
    """
    opener = getattr(backend, "start_read_only", None)
    await (opener() if callable(opener) else backend.start())
    try:
        yield backend
    finally:
        await backend.close()


def utc(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z" if moment else "-"


def iso(moment: datetime | None) -> str | None:
    """A UTC instant for ``--json``: ISO 8601 ending in ``Z``; ``None`` (no next slot) stays ``None``."""
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell: readable in a terminal, greppable in a log."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


RUN_HEADERS = ["slot (UTC)", "status", "instance", "attempt", "fencing", "manual", "catch-up", "ms", "error"]


def run_rows(runs: Sequence[Run]) -> list[list[object]]:
    return [
        [
            utc(r.slot),
            r.status.value,
            r.instance,
            r.attempt,
            r.fencing,
            "yes" if r.manual else "",
            f"{r.missed} missed" if r.catch_up else "",
            r.duration_ms,
            r.error or "",
        ]
        for r in runs
    ]


def print_runs(runs: Sequence[Run], as_json: bool, empty: str = "no runs recorded") -> None:
    if as_json:
        print(json.dumps([r.to_dict() for r in runs], indent=2))
    elif runs:
        print(table(RUN_HEADERS, run_rows(runs)))
    else:
        print(empty)


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2))


def positive_int(text: str) -> int:
    """An argument that counts something (``--limit N``): a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value
