"""``anarchon every-instance NAME``: which live instance ran, or missed, each recent slot of an every-instance job.

Read-only, from the fleet registry and each instance's copy's history
(:func:`anarchon.every_instance.instance_runs`): one row per live instance,
one column per slot, ``missed`` where that instance has no record.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..every_instance import InstanceSlot, instance_runs
from ..options import check_job_name
from ..run import ms_to_datetime
from ._common import BACKEND_ENV, positive_int, print_json, reading, resolve, table

__all__ = ["COMMANDS", "register"]

Command = Callable[..., argparse.ArgumentParser]


def register(command: Command, options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``every-instance``; ``options`` adds ``--backend`` and ``--json``."""
    p = command(
        "every-instance",
        "show each live instance's recent slots of an every_instance job: ran, failed or missed",
        "A job added with every_instance=True runs once per slot on each live instance, each instance's runs "
        "recorded apart. This lists the last slots of each live instance (from the fleet registry) and what "
        f"its run did; 'missed' where it has none. Name the backend with --backend URL or {BACKEND_ENV}; needs "
        "the capability 'registry'.",
    )
    p.add_argument("name", metavar="NAME", help="the job's name, as given to add()")
    p.add_argument("--slots", type=positive_int, default=10, metavar="N", help="the last N slots (default 10)")
    options(p)


def _cell(slot: InstanceSlot) -> str:
    return "missed" if slot.run is None else slot.run.status.value


async def every_instance(args: argparse.Namespace) -> int:
    check_job_name(args.name)
    _, backend = resolve(None, args.backend)
    async with reading(backend):
        rows = await instance_runs(backend, args.name, slots=args.slots)
    if args.json:
        print_json(
            [{"instance": r.instance, "slot_ms": r.slot_ms, "status": _cell(r), "missed": r.missed} for r in rows]
        )
        return 0
    if not rows:
        print(f"no live instance has run {args.name} (added with every_instance=True)")
        return 0
    slots = sorted({r.slot_ms for r in rows})
    cells = {(r.instance, r.slot_ms): _cell(r) for r in rows}
    instances = sorted({r.instance for r in rows})
    header = ["instance", *(ms_to_datetime(s).strftime("%H:%M:%S") for s in slots)]
    print(table(header, [[i, *(cells.get((i, s), "-") for s in slots)] for i in instances]))
    return 0


COMMANDS = {"every-instance": every_instance}
