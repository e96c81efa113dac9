"""``python -m chaos.churn``: instances joining and leaving every few seconds for minutes, default options.

What an autoscaler does to a fleet, and what moves every instance's view of
it while ranked claims (docs/protocol.md) decide who tries each slot first:
two instances stay, up to ``--extra`` more start and stop (SIGTERM) about
every ``--gap`` seconds, seeded. At the end the ledger is reconciled: slots,
run twice, missed, skipped for overlap. The conformance suite's
``test_instances_joining_and_leaving_miss_and_double_nothing`` is its short
form (20 s, every lease backend, in CI).

    python -m chaos.churn --backend sqlite:///tmp/churn.sqlite3 --minutes 10
    python -m chaos.churn --backend "redis://127.0.0.1:6379/0?prefix=churn:" --minutes 10
"""

from __future__ import annotations

import argparse
import time

from anarchon_conformance.fleet import Fleet

from ._fleetrun import run_and_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True, help="the backend's URL (a namespace of its own)")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--extra", type=int, default=2, help="instances that come and go beside the two that stay")
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between two changes (±50 %%)")
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()

    def churn(f: Fleet) -> int:
        changes = f.churn(time.monotonic() + args.minutes * 60, seed=args.seed, extra=args.extra, gap_s=args.gap)
        time.sleep(2)
        return changes

    run_and_report(f"churn, {args.minutes:g} min (changes: joins and leaves)", args.backend, 2, args.jobs, churn)


if __name__ == "__main__":
    main()
