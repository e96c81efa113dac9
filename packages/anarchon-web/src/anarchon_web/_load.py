"""What the command serves: a scheduler named ``module:attr``, or jobs named on the command line."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from anarchon import AnarchonError, Scheduler

__all__ = ["UsageError", "load_scheduler", "parse_job"]


class UsageError(AnarchonError):
    """A command line that cannot work; the message says how to fix it."""


def load_scheduler(target: str) -> Scheduler:
    """Import ``module:attr`` (a Scheduler, or a function returning one), as uvicorn and celery do."""
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
    return obj


def parse_job(text: str) -> tuple[str, str, str]:
    """``NAME=CRON`` or ``NAME=CRON@ZONE`` -> (name, cron, zone); ``@daily@Europe/Athens`` works too."""
    name, sep, rest = text.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise UsageError(
            f"--job {text!r}: write NAME=CRON or NAME=CRON@ZONE, e.g. --job 'report=0 2 * * *@Europe/Athens'"
        )
    cron, at, zone = rest.rpartition("@")
    if not at or not cron.strip():
        return name.strip(), rest.strip(), "UTC"
    return name.strip(), cron.strip(), zone.strip()


def _not_here() -> None:
    raise RuntimeError("this job was named on the anarchon-web command line; its function lives in the fleet")


def add_jobs(scheduler: Scheduler, jobs: list[str]) -> None:
    for text in jobs:
        name, cron, zone = parse_job(text)
        scheduler.add(name, cron, _not_here, timezone=zone)
