"""``python -m chaos.failover``: the referee fails over while instances claim; one table per backend and option.

Each backend runs twice, with its default options and with its durable one,
one private replicated server set at a time (started, failed over, stopped).
Exit status 0 when no durable run had a duplicate and every run could run, 1
when a durable run had one, 2 when a run could not run. A duplicate with the
default options is the measured finding, not a failure: it is what the
durable option exists for. A backend without a durable option (RabbitMQ) is
held to its defaults.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from scripts.report import FAULT_INTRO, write_section

from .backends import FAILOVER_BROKERS
from .backends import FAILOVER_ORDER as ORDER
from .failover_scenario import FailoverResult, run_failover
from .judge import Verdict
from .scenario import Config

__all__ = ["ORDER", "available", "main", "markdown", "table"]

RESULTS = Path(__file__).resolve().parent / "results"
COLUMNS = ["backend", "options", "failovers", "slots", "claims across them", "duplicates", "slots lost", "verdict"]


def available() -> dict[str, str | None]:
    return {name: FAILOVER_BROKERS[name].available() for name in ORDER}


def _row(r: FailoverResult) -> list[str]:
    v = r.verdict
    kinds = ", ".join(sorted({k for k, _, _ in r.failovers}))
    verdict = "PASS" if r.passed and r.promised else ("measured" if r.passed else "FAIL")
    if v.error:
        return [r.backend, r.note, str(len(r.failovers)), "-", "-", "-", "-", f"ERROR: {v.error[:100]}"]
    return [
        r.backend,
        r.note,
        f"{len(r.failovers)} ({kinds})",
        str(v.slots),
        str(r.across),
        str(r.duplicates),
        str(r.lost),
        verdict,
    ]


def table(results: Sequence[FailoverResult]) -> str:
    rows = [COLUMNS, *(_row(r) for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(results: Sequence[FailoverResult], header: str) -> str:
    out = [f"# anarchon failover scenario — {header}", "", "| " + " | ".join(COLUMNS) + " |"]
    out.append("|" + "---|" * len(COLUMNS))
    out += ["| " + " | ".join(c.replace("|", "/") for c in _row(r)) + " |" for r in results]
    for r in results:
        v = r.verdict
        out += ["", f"## {r.backend}, {r.note} — {_row(r)[-1]} in {v.seconds} s", ""]
        out += [f"- {n}" for n in v.notes]
        for kind, start, end in r.failovers:
            out.append(f"- failover ({kind}) at {start}: {end - start} ms until every client was moved")
        if v.lost_other:
            out.append("- slots lost by cause: " + ", ".join(f"{k}: {n}" for k, n in v.lost_other.most_common()))
        if v.excluded:
            out.append("- excluded by the judge: " + ", ".join(f"{k}: {n}" for k, n in v.excluded.most_common()))
        out.append(
            f"- ran {v.runs} of {v.slots} slots; skipped for overlap {v.skipped_overlap}; abandoned {v.abandoned} "
            f"({v.abandoned_chains} whose next slot did not run); "
            f"caught up {v.catch_up_runs} runs / {v.coalesced} slots"
        )
        if r.second_runs:
            out += [
                "",
                f"**Second runs** ({len(r.second_runs)}): a later grant of one slot whose fencing token did not grow",
                "",
            ]
            out += [f"- `{d}`" for d in r.second_runs[:25]]
        if v.error:
            out += ["", f"Error: `{v.error}`"]
    out += [
        "",
        "## Glossary",
        "",
        "- *claims across them*: slots within 2 s of a failover's window (the primary's death or the promotion, "
        "to the last client moved) that ran.",
        "- *duplicates*: slots run by two grants of the same attempt (two winners), or whose runs overlapped; "
        "nothing in this scenario hands a run over, so one attempt started twice is a second winner.",
        "- *slots lost*: slots no run started and no later run covered: claim answers unknown, slots skipped "
        "for overlap with a grant that never ran (an unknown claim still holds its lease), abandoned slots, "
        "and slots in a window with no referee.",
        "- *measured*: a run with the default options; its duplicates are the finding the durable option answers. "
        "RabbitMQ has no durable option (quorum gates are no mutex), so its defaults are held to the promise.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chaos.failover", description=__doc__)
    p.add_argument("--backends", help=f"comma-separated, from {','.join(ORDER)} (default: every one runnable here)")
    p.add_argument("--options", choices=["both", "default", "durable"], default="both")
    p.add_argument("--instances", type=int, default=5)
    p.add_argument("--jobs", type=int, default=None, help="every-second jobs (default 20, 5 with --short)")
    p.add_argument("--seconds", type=float, default=None, help="per run (default 40, 20 with --short)")
    p.add_argument("--every", type=float, default=None, help="seconds between failovers (default 8, 5 with --short)")
    p.add_argument("--short", action="store_true", help="what make test runs")
    p.add_argument("--workdir", type=Path)
    p.add_argument("--no-results", action="store_true", help="do not write chaos/results/REPORT.md")
    args = p.parse_args(argv)
    reasons = available()
    names = [n.strip() for n in args.backends.split(",")] if args.backends else [n for n in ORDER if not reasons[n]]
    unknown = [n for n in names if n not in FAILOVER_BROKERS]
    if unknown:
        print(f"unknown backend(s) {', '.join(unknown)}; choose from {', '.join(ORDER)}", file=sys.stderr)
        return 2
    cfg = Config(
        instances=args.instances,
        jobs=args.jobs if args.jobs is not None else (5 if args.short else 20),
        seconds=args.seconds if args.seconds is not None else (20.0 if args.short else 40.0),
        seed=random.randrange(1, 1_000_000),
        short=args.short,
    )
    every = args.every if args.every is not None else (5.0 if args.short else 8.0)
    keep = args.workdir is not None
    cfg.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="anarchon-failover-"))
    say = functools.partial(print, flush=True)
    variants = {"both": (False, True), "default": (False,), "durable": (True,)}[args.options]
    began = time.monotonic()
    results = []
    for name in names:
        for durable in [d for d in variants if not d or FAILOVER_BROKERS[name].has_durable]:
            reason = reasons.get(name)
            if reason:
                r = FailoverResult(name, durable, "-", Verdict(name, "?", error=f"not runnable here: {reason}"))
            else:
                r = run_failover(name, durable, cfg, every, say)
            say(f"[{name}] {_row(r)}")
            results.append(r)
    print()
    print(table(results))
    total = time.monotonic() - began
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M%S")
    header = (
        f"{stamp} UTC, {'short' if cfg.short else 'full'} run: {cfg.instances} instances x {cfg.jobs} every-second "
        f"jobs + 1 slow job, {cfg.seconds:.0f} s per run, a failover every {every:.0f} s, {total:.0f} s in all"
    )
    if not args.no_results:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / "REPORT.md"  # its section of the one current report; git keeps the older
        key, label = (
            ("failover-short", "The short failover scenario (`--short`)")
            if cfg.short
            else ("failover", "The failover scenario (`python -m chaos.failover`)")
        )
        write_section(path, key, label, markdown(results, header), FAULT_INTRO)
        print(f"results: {path}")
    if all(r.passed for r in results) and not keep:
        shutil.rmtree(cfg.workdir, ignore_errors=True)
    else:
        print(f"ledgers and logs kept in {cfg.workdir}")
    if any(r.verdict.error for r in results):
        return 2
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
