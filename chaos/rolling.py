"""``python -m chaos.rolling``: a fleet restarted pod by pod for minutes, with the default options.

What every Kubernetes rollout does: 3 instances with ``--jobs`` every-second
jobs (no option set), and, round after round for ``--minutes``, each
instance in turn stopped with SIGTERM (its runs handed over) and replaced by
a new process that is ready before the next one stops, ``--pause`` seconds
apart. At the end the ledger is reconciled: slots, run twice, missed,
skipped for overlap. The conformance suite's
``test_a_rolling_restart_misses_and_doubles_nothing`` is its short form.

    python -m chaos.rolling --backend sqlite:///tmp/roll.sqlite3 --minutes 10
    python -m chaos.rolling --backend "redis://127.0.0.1:6379/0?prefix=roll:" --minutes 10
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
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between two instances' restarts")
    args = parser.parse_args()

    def roll(f: Fleet) -> int:
        until = time.monotonic() + args.minutes * 60
        restarts = 0
        while time.monotonic() < until:
            restarts += len(f.roll(timeout=120, pause_s=args.pause, until=until))
        return restarts

    run_and_report(f"rolling restart, {args.minutes:g} min (changes: restarts)", args.backend, 3, args.jobs, roll)


if __name__ == "__main__":
    main()
