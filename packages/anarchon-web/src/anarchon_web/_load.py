"""What the command serves: a scheduler named ``module:attr``, or jobs named on the command line."""

from __future__ import annotations

from anarchon import Scheduler
from anarchon.cli import UsageError, load_scheduler

__all__ = ["UsageError", "load_scheduler", "parse_job"]


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
