"""``python -m benchmarks``: every measurement for every reachable backend, then the report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from scripts.report import BENCHMARK_INTRO, write_section

from . import backends
from ._burst import burst
from ._claims import contended, overhead
from ._fleet import end_to_end
from ._long_report import LongResult, long_markdown, soak_chart
from ._machine import machine
from ._report import BackendResult, chart, markdown
from ._scale import MANY_FREQUENT, MANY_FREQUENT_CRON, MANY_JOBS, scale
from ._soak import soak
from ._target import Target, new_namespace

HERE = Path(__file__).parent
PHASES = ("claims", "contended", "scale", "e2e")
#: The long modes run only when asked for, instead of the phases above.
LONG_MODES = ("soak", "burst", "many")
#: Backends a long mode leaves out, and why (the report says so).
_LONG_SKIP = {
    "memory": "one process holds the store; the long modes need 3 instance processes",
    "rabbitmq": "1,000 (10,000) history streams are past what one broker here creates",
}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer calls and shorter windows: a smoke run of ~4 minutes")
    p.add_argument(
        "--backends",
        default=",".join(backends.DEFAULT),
        help=f"comma-separated subset of {','.join(backends.NAMES)} "
        f"(default: {','.join(backends.DEFAULT)}, those whose server answers)",
    )
    p.add_argument("--only", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}")
    p.add_argument("--out", type=Path, default=HERE / "results", help="folder for the markdown report and the chart")
    p.add_argument(
        "--e2e-seconds", type=float, default=None, help="length of the end-to-end run (default 30, quick 10)"
    )
    p.add_argument(
        "--soak", action="store_true", help="3 instances x 1,000 every-second jobs with history_size=100, per minute"
    )
    p.add_argument("--minutes", type=int, default=10, help="length of --soak in minutes (default 10)")
    p.add_argument("--burst", action="store_true", help="10,000 jobs due at the same second across 3 instances")
    p.add_argument("--many", action="store_true", help="one scheduler with 100,000 jobs: RSS and idle CPU")
    args = p.parse_args(argv)
    if args.minutes < 1:
        p.error(f"--minutes {args.minutes}: give a whole number of minutes, at least 1 (e.g. --minutes 3)")
    args.long_modes = [m for m in LONG_MODES if getattr(args, m)]
    args.backend_list = [b.strip() for b in args.backends.split(",") if b.strip()]
    args.phase_list = [x.strip() for x in args.only.split(",") if x.strip()]
    for b in args.backend_list:
        if b not in backends.NAMES:
            p.error(f"unknown backend {b!r}; choose from {', '.join(backends.NAMES)}")
    for x in args.phase_list:
        if x not in PHASES:
            p.error(f"unknown phase {x!r}; choose from {', '.join(PHASES)}")
    return args


def _ensure_requirements() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        print("installing benchmarks/requirements.txt (matplotlib) for the chart …", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "-r", str(HERE / "requirements.txt")], check=True
        )


@contextlib.contextmanager
def _phase(result: BackendResult | LongResult, what: str) -> Iterator[None]:
    began = time.monotonic()
    print(f"  {what} …", end="", flush=True)
    try:
        yield
    except Exception as exc:
        result.errors[what] = f"{type(exc).__name__}: {exc}"[:500]
        print(f" FAILED ({result.errors[what]})", flush=True)
    else:
        print(f" done in {time.monotonic() - began:.0f} s", flush=True)


def _set_up(target: Target) -> str | None:
    """Run the target's ``setup()`` (a private server, for one); why it failed, or ``None``."""
    try:
        asyncio.run(target.setup())
    except Exception as exc:
        return f"setup failed: {type(exc).__name__}: {exc}"
    return None


def _measure(target: Target, args: argparse.Namespace) -> BackendResult:
    result = BackendResult(target.name)
    quick = args.quick
    if (why := _set_up(target)) is not None:
        result.skipped = why
        return result
    try:
        why = asyncio.run(target.unreachable())
        if why is not None:
            result.skipped = f"server unreachable: {why}"
            return result
        result.versions = asyncio.run(target.versions())
        result.notes = list(target.notes)
        used: list[str] = []
        if "claims" in args.phase_list:
            with _phase(result, "claim overhead"):
                ns = new_namespace()
                used.append(ns)
                calls = max(100, target.sequential_calls // 5) if quick else target.sequential_calls
                result.claims = asyncio.run(overhead(target, ns, calls, 1.0 if quick else 3.0))
                print(
                    f" (p50 ratio {result.claims.ratio_p50:.2f}x, 16-way {result.claims.ratio_throughput:.2f}x)", end=""
                )
        if "contended" in args.phase_list:
            with _phase(result, "contended claim"):
                ns = new_namespace()
                used.append(ns)
                result.contended = asyncio.run(contended(target, ns, 100 if quick else 500))
        if "scale" in args.phase_list:
            with _phase(result, "scale"):
                asyncio.run(target.fresh())
                empty, full = new_namespace(), new_namespace()
                used += [empty, full]
                result.scale = scale(target, empty, full, 5.0 if quick else 20.0)
        if "e2e" in args.phase_list:
            for jobs in target.fleet_jobs:
                with _phase(result, f"end to end, {jobs} jobs"):
                    asyncio.run(target.fresh())
                    ns = new_namespace()
                    used.append(ns)
                    seconds = args.e2e_seconds or (10.0 if quick else 30.0)
                    e = end_to_end(target, ns, seconds, jobs)
                    result.e2e.append(e)
                    print(f" (dup {e.duplicates}, missed {e.missed}, delay p99 {e.delay.p99:.0f} ms)", end="")
        for ns in used:
            try:
                asyncio.run(target.cleanup(ns))
            except Exception as exc:
                result.errors[f"cleanup {ns}"] = f"{type(exc).__name__}: {exc}"
    finally:
        asyncio.run(target.teardown())
    return result


def _measure_long(target: Target, args: argparse.Namespace) -> LongResult:
    result = LongResult(target.name)
    if target.name in _LONG_SKIP:
        result.skipped = _LONG_SKIP[target.name]
        return result
    if (why := _set_up(target)) is not None:
        result.skipped = why
        return result
    try:
        _long_phases(target, args, result)
    finally:
        asyncio.run(target.teardown())
    return result


def _long_phases(target: Target, args: argparse.Namespace, result: LongResult) -> None:
    try:
        why = asyncio.run(target.unreachable())
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
    if why is not None:
        result.skipped = f"server unreachable: {why}"
        return
    result.versions = asyncio.run(target.versions())
    used: list[str] = []
    if "soak" in args.long_modes:
        with _phase(result, f"soak, {args.minutes} min"):
            used.append(ns := new_namespace())
            result.soak = soak(target, ns, args.minutes)
    if "burst" in args.long_modes:
        with _phase(result, "burst, 10,000 jobs"):
            used.append(ns := new_namespace())
            result.bursts = burst(target, ns)
    if "many" in args.long_modes:
        with _phase(result, "one scheduler, 100,000 jobs"):
            empty, full = new_namespace(), new_namespace()
            used += [empty, full]
            result.many = scale(target, empty, full, 60.0, MANY_JOBS, MANY_FREQUENT, MANY_FREQUENT_CRON)
    for ns in used:
        try:
            asyncio.run(target.cleanup(ns))
        except Exception as exc:
            result.errors[f"cleanup {ns}"] = f"{type(exc).__name__}: {exc}"


#: The sections of benchmarks/results/REPORT.md, by the run's kind.
LABELS = {
    "standard": "Every phase, every backend (`python -m benchmarks`)",
    "claims": "Claims only (`--only claims`)",
    "burst": "A burst of slots (`--burst`)",
    "many": "Many jobs (`--many`)",
    "soak": "Soak (`--soak`)",
}


def _label(stem: str) -> str:
    return LABELS.get(stem, f"`{stem}`")


def _main_long(args: argparse.Namespace, info: dict[str, str], shown: str) -> None:
    results = []
    for name in args.backend_list:
        print(f"{name}:", flush=True)
        result = _measure_long(backends.load(name), args)
        if result.skipped:
            print(f"  skipped: {result.skipped}")
        results.append(result)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "-".join(args.long_modes)  # its section of the one current report; git keeps the older
    chart_path = args.out / f"{stem}.png"
    drawn = soak_chart(results, chart_path)
    page = long_markdown(info, results, shown, chart_path.name if drawn else None)
    report = args.out / "REPORT.md"
    write_section(report, stem, _label(stem), page, BENCHMARK_INTRO)
    print()
    print(page)
    print(f"report: {report}" + (f", chart: {chart_path}" if drawn else ""))


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    _ensure_requirements()
    info = machine()
    if args.long_modes:
        _main_long(args, info, " ".join(argv if argv is not None else sys.argv[1:]))
        return
    load = info["load average at start (1/5/15 min)"]
    print(f"anarchon benchmarks on {info['cores (nproc)']} cores ({info['CPU']}), load {load}")
    results: list[BackendResult] = []
    for name in args.backend_list:
        print(f"{name}:", flush=True)
        target = backends.load(name)
        result = _measure(target, args)
        if result.skipped:
            print(f"  skipped: {result.skipped}")
        results.append(result)
    args.out.mkdir(parents=True, exist_ok=True)
    # Its section of the one current report (git keeps the older): standard, or claims for --only claims.
    every = args.phase_list == list(PHASES)
    stem = ("standard" if every else "-".join(args.phase_list)) + ("-quick" if args.quick else "")
    chart_path = args.out / f"{stem}-start-delay.png"
    drawn = chart(results, chart_path)
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    page = markdown(info, results, shown, chart_path.name if drawn else None)
    report = args.out / "REPORT.md"
    write_section(report, stem, _label(stem), page, BENCHMARK_INTRO)
    print()
    print(page)
    print(f"report: {report}" + (f", chart: {chart_path}" if drawn else ""))
