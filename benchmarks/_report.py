"""The results as a markdown page and a chart of start delay per backend."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ._claims import ClaimFigures, ContendedFigures
from ._fleet import EndToEnd
from ._scale import Scale
from .backends import CLAIM_TARGET

__all__ = ["BackendResult", "chart", "markdown"]

DELAY_P99_TARGET_MS = 20.0
RSS_TARGET_MB = 50.0
IDLE_TARGET_PERCENT = 2.0


@dataclass
class BackendResult:
    name: str
    skipped: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    claims: ClaimFigures | None = None
    contended: ContendedFigures | None = None
    e2e: list[EndToEnd] = field(default_factory=list)
    scale: Scale | None = None
    errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _f(x: float, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _mark(ok: bool | None) -> str:
    return "" if ok is None else (" ✅" if ok else " ❌")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def markdown(info: dict[str, str], results: list[BackendResult], args: str, chart_name: str | None) -> str:
    lines = [f"# anarchon benchmarks, {info['date']}", ""]
    lines += [f"Command: `python -m benchmarks {args}`".rstrip(), ""]
    lines += ["## Machine and versions", ""]
    lines += _table(["what", "value"], [[k, v] for k, v in info.items()])
    versions = [[r.name, ", ".join(f"{k} {v}" for k, v in r.versions.items())] for r in results if r.versions]
    if versions:
        lines += ["", *_table(["backend", "client and server versions"], versions)]
    skipped = [r for r in results if r.skipped]
    if skipped:
        lines += ["", "Not measured: " + "; ".join(f"**{r.name}** ({r.skipped})" for r in skipped) + "."]
    done = [r for r in results if not r.skipped]

    lines += ["", "## 1. Claim overhead: `Backend.claim()` against the raw primitive", ""]
    lines += [
        "Sequential: one claim of one job per call, taking turns with the raw primitive call by call; a lease "
        "backend's run is finished (untimed) before the next claim. 16-way: 16 instances (backend objects) "
        "against 16 raw clients in one process, each on its own jobs (lease backends: overlap allowed, 100 ms lease, "
        "so each claim also marks the previous expired run abandoned). Ratio = anarchon / raw (time per "
        "operation); target on a 2-core machine in brackets.",
        "",
    ]
    rows = []
    for r in done:
        c = r.claims
        if c is None:
            continue
        target = CLAIM_TARGET.get(r.name)
        ok_seq = None if target is None else c.ratio_p50 <= target
        ok_conc = None if target is None else c.ratio_throughput <= target
        rows.append(
            [
                r.name,
                c.primitive,
                f"{_f(c.raw.p50, 3)} / {_f(c.raw.p99, 3)}",
                f"{_f(c.claim.p50, 3)} / {_f(c.claim.p99, 3)}",
                f"{_f(c.ratio_p50)}x{_mark(ok_seq)}" + (f" (≤ {target})" if target else ""),
                f"{_f(c.raw_per_s, 0)}",
                f"{_f(c.claim_per_s, 0)}",
                f"{_f(c.ratio_throughput)}x{_mark(ok_conc)}",
                f"{_f(c.batch_ms, 1)} ({_f(c.batch_ms * 10, 0)} µs each) / {_f(c.singles_ms, 1)}",
            ]
        )
    lines += _table(
        [
            "backend",
            "raw primitive",
            "raw p50 / p99 ms",
            "claim() p50 / p99 ms",
            "ratio p50",
            "raw /s (16-way)",
            "claim() /s (16-way)",
            "ratio 16-way",
            "100 due together: one call / 100 calls, ms",
        ],
        rows,
    )

    lines += ["", "## 2. Contended claim: independent instances racing for each slot", ""]
    rows = []
    for r in done:
        k = r.contended
        if k is None:
            continue
        rows.append(
            [
                r.name,
                f"{k.racers} x {k.slots}",
                _f(k.latency.p50, 3),
                _f(k.latency.p99, 3),
                f"{k.double_wins}{_mark(k.double_wins == 0)}",
                str(k.no_winner),
            ]
        )
    lines += _table(
        ["backend", "racers x slots", "answer p50 ms", "answer p99 ms", "slots with >1 winner", "slots with no winner"],
        rows,
    )

    lines += ["", "## 3. End to end: 1,000 every-second jobs shared by 3 scheduler processes", ""]
    lines += [
        "Jobs run with `jitter_ms=0`: the scheduler does not record the jitter it draws, so only without jitter "
        "is the start delay beyond the jitter measured (ledger start time - slot) rather than guessed; it is also "
        "the hardest case, every instance claiming all 1,000 slots in the same millisecond. *Skipped (overlap)*: "
        "on a lease backend a slot whose claim found the job's previous run still holding its lease (not yet "
        "finished) is recorded `skipped`, by the lease rules; the job itself takes no time, so each such slot is "
        "one the scheduler was too slow for. CPU: user + system of all instance processes over the measured "
        "window, per 1,000 runs started in it.",
        "",
    ]
    rows = []
    for r, e in [(res, e) for res in done for e in res.e2e]:
        skipped = e.slots - e.runs - e.missed
        ok_delay = e.delay.p99 <= DELAY_P99_TARGET_MS
        rows.append(
            [
                r.name,
                f"{e.instances} x {e.jobs}",
                _f(e.runs_per_s, 0),
                f"{e.slots:,}",
                f"{e.duplicates}{_mark(e.duplicates == 0)}",
                f"{e.missed}{_mark(e.missed == 0)}",
                f"{skipped:,}{_mark(skipped == 0)}",
                f"{_f(e.delay.p50, 0)} / {_f(e.delay.p99, 0)}{_mark(ok_delay)} / {_f(e.delay.max, 0)}",
                _f(e.cpu_s_per_1000_runs, 3),
                _f(e.cpu_cores, 2),
            ]
        )
    lines += _table(
        [
            "backend",
            "processes x jobs",
            "runs/s",
            "slots judged",
            "duplicates",
            "missed",
            "skipped (overlap)",
            "start delay p50 / p99 / max ms",
            "CPU s per 1,000 runs",
            "cores busy",
        ],
        rows,
    )
    if chart_name:
        lines += ["", f"![start delay per backend]({chart_name})"]

    lines += ["", "## 4. One scheduler with 10,000 jobs (the rest of them daily)", ""]
    rows = []
    for r in done:
        s = r.scale
        if s is None:
            continue
        rows.append(
            [
                r.name,
                f"{s.jobs:,} ({s.frequent})",
                f"{_f(s.rss_empty_mb, 1)} → {_f(s.rss_full_mb, 1)}",
                f"{_f(s.rss_above_empty_mb, 1)}{_mark(s.rss_above_empty_mb <= RSS_TARGET_MB)}",
                _f(s.add_s, 2),
                _f(s.start_s, 2),
                f"{_f(s.idle_cpu_s_per_min, 2)} s ({_f(s.idle_core_percent, 2)} %)"
                f"{_mark(s.idle_core_percent < IDLE_TARGET_PERCENT)}",
                _f(s.idle_window_s, 0),
            ]
        )
    lines += _table(
        [
            "backend",
            "jobs (frequent ones)",
            "RSS empty → full MB",
            "RSS above empty MB",
            "add() of all s",
            "start() s",
            "idle CPU per minute (share of one core)",
            "measured over s",
        ],
        rows,
    )
    errors = [(r.name, what, err) for r in results for what, err in r.errors.items()]
    notes = [n for r in done for n in r.notes]
    if notes:
        lines += ["", "## How some backends were run", ""]
        lines += [f"- {n}" for n in notes]
    if errors:
        lines += ["", "## Failures", ""]
        lines += [f"- **{name}**, {what}: `{err}`" for name, what, err in errors]
    lines += [""]
    return "\n".join(lines)


def chart(results: list[BackendResult], path: Path) -> bool:
    """A PNG of start delay (p50, p99, max) per backend; ``False`` when there is nothing to draw."""
    rows = [(r.name if e.jobs == 1000 else f"{r.name}\n({e.jobs} jobs)", e) for r in results for e in r.e2e]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, _ in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    width = 0.27
    for k, (label, pick) in enumerate(
        (("p50", lambda e: e.delay.p50), ("p99", lambda e: e.delay.p99), ("max", lambda e: e.delay.max))
    ):
        xs = [i + (k - 1) * width for i in range(len(rows))]
        ax.bar(xs, [max(pick(e), 0.5) for _, e in rows], width, label=label)
    ax.axhline(
        DELAY_P99_TARGET_MS, color="red", linestyle="--", linewidth=1, label=f"p99 target {DELAY_P99_TARGET_MS:g} ms"
    )
    ax.set_xticks(range(len(rows)), names)
    ax.set_yscale("log")
    ax.set_ylabel("start delay beyond jitter (ms, log scale)")
    ax.set_title("1,000 every-second jobs, jitter_ms=0: slot time to job start")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
