"""``python -m chaos``: the fault suite, one scenario per backend, one table at the end.

Exit status 0 when every backend kept its promises, 1 when one broke one, 2
when a scenario could not run (a broker would not start, an instance crashed
at start).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from scripts.report import FAULT_INTRO, write_section

from . import judge as judge_module
from .backends import BROKERS, ORDER
from .judge import Verdict
from .report import markdown, table
from .scenario import Config, run_scenario

RESULTS = Path(__file__).resolve().parent / "results"


def available_backends() -> dict[str, str | None]:
    """Each backend's reason not to run here, or ``None``."""
    return {name: BROKERS[name].available() for name in ORDER}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    p.add_argument("--backends", help=f"comma-separated, from {','.join(ORDER)} (default: every one runnable here)")
    p.add_argument("--instances", type=int, default=5)
    p.add_argument("--jobs", type=int, default=None, help="every-second jobs (default 20, 5 with --short)")
    p.add_argument("--seconds", type=float, default=None, help="per backend (default 60, 20 with --short)")
    p.add_argument("--seed", type=int, default=None, help="the fault plan's seed (default: random, printed)")
    p.add_argument("--short", action="store_true", help="fewer jobs and faults, ~20 s per backend (CI)")
    p.add_argument(
        "--rules-only",
        action="store_true",
        help="judge by the lease rules alone (docs/concepts.md): an abandoned slot whose next slot did not run "
        "either is a warning, not a failure",
    )
    p.add_argument("--workdir", type=Path, help="keep ledgers and logs here (default: a temp dir)")
    p.add_argument("--json", type=Path, help="also write the verdicts as JSON here")
    p.add_argument("--no-results", action="store_true", help="do not write chaos/results/REPORT.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    reasons = available_backends()
    if args.backends:
        names = [n.strip() for n in args.backends.split(",") if n.strip()]
        unknown = [n for n in names if n not in BROKERS]
        if unknown:
            print(f"unknown backend(s) {', '.join(unknown)}; choose from {', '.join(ORDER)}", file=sys.stderr)
            return 2
    else:
        names = [n for n in ORDER if reasons[n] is None]
        for n in ORDER:
            if reasons[n] is not None:
                print(f"skipping {n}: {reasons[n]}")
    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    cfg = Config(
        instances=args.instances,
        jobs=args.jobs if args.jobs is not None else (5 if args.short else 20),
        seconds=args.seconds if args.seconds is not None else (20.0 if args.short else 60.0),
        seed=seed,
        short=args.short,
        workdir=args.workdir,
        rules_only=args.rules_only,
    )
    print(
        f"anarchon chaos: {', '.join(names) or 'no backend'}; {cfg.instances} instances x {cfg.jobs} every-second jobs "
        f"+ a slow job ({cfg.slow_cron}, {cfg.slow_seconds:.0f} s), {cfg.seconds:.0f} s each, seed {seed}"
    )
    keep = args.workdir is not None
    cfg.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="anarchon-chaos-"))
    say = functools.partial(print, flush=True)
    verdicts: list[Verdict] = []
    began = time.monotonic()
    errors = False
    for name in names:
        reason = reasons.get(name)
        if reason is not None:
            verdicts.append(Verdict(name, "?", error=f"not runnable here: {reason}"))
            errors = True
            continue
        try:
            verdict = run_scenario(name, cfg, say)
        except Exception as exc:
            traceback.print_exc()
            verdict = Verdict(name, "?", error=f"{type(exc).__name__}: {exc}")
            errors = True
        say(f"[{name}] {'PASS' if verdict.passed else 'FAIL'}: {judge_module.summary_line(verdict)}")
        for line in verdict.broken[:10] + verdict.duplicates[:10]:
            say(f"[{name}]   {line}")
        verdicts.append(verdict)
    total = time.monotonic() - began
    print()
    print(table(verdicts))
    print(f"\nseed {seed}, {total:.0f} s in all")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M%S")
    header = (
        f"{stamp} UTC, seed {seed}, {'short' if cfg.short else 'full'} run: {cfg.instances} instances x "
        f"{cfg.jobs} every-second jobs + 1 slow job, {cfg.seconds:.0f} s per backend, {total:.0f} s in all"
    )
    if not args.no_results:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / "REPORT.md"  # its section of the one current report; git keeps the older
        key, label = (
            ("faults-short", "The short fault scenario (`python -m chaos --short`)")
            if cfg.short
            else ("faults", "The fault scenario (`python -m chaos`)")
        )
        write_section(path, key, label, markdown(verdicts, header, judge_module.__doc__ or ""), FAULT_INTRO)
        print(f"results: {path}")
    if args.json:
        args.json.write_text(json.dumps({"seed": seed, "verdicts": [v.as_dict() for v in verdicts]}, indent=2))
    passed = all(v.passed for v in verdicts) and not errors
    if passed and not keep:
        shutil.rmtree(cfg.workdir, ignore_errors=True)
    else:
        print(f"ledgers and logs kept in {cfg.workdir}")
    if errors:
        return 2
    return 0 if all(v.passed for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
