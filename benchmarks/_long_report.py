"""The long-running modes' page (soak, burst, 100,000 jobs) and the soak's picture."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ._burst import Burst
from ._scale import Scale
from ._soak import Soak

__all__ = ["LongResult", "long_markdown", "soak_chart"]

BURST_TARGET_MS = 2000.0
MANY_RSS_TARGET_MB = 300.0
IDLE_TARGET_PERCENT = 2.0


@dataclass
class LongResult:
    name: str
    skipped: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    soak: Soak | None = None
    bursts: list[Burst] = field(default_factory=list)
    many: Scale | None = None
    errors: dict[str, str] = field(default_factory=dict)


def _f(x: float, digits: int = 0) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _mark(ok: bool) -> str:
    return " ✅" if ok else " ❌"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(row) + " |" for row in rows]


def long_markdown(info: dict[str, str], results: list[LongResult], args: str, chart_name: str | None) -> str:
    lines = [f"# anarchon benchmarks (long modes), {info['date']}", "", f"Command: `python -m benchmarks {args}`", ""]
    lines += _table(["what", "value"], [[k, v] for k, v in info.items()])
    versions = [[r.name, ", ".join(f"{k} {v}" for k, v in r.versions.items())] for r in results if r.versions]
    if versions:
        lines += ["", *_table(["backend", "client and server versions"], versions)]
    skipped = [r for r in results if r.skipped]
    if skipped:
        lines += ["", "Not measured: " + "; ".join(f"**{r.name}** ({r.skipped})" for r in skipped) + "."]
    soaks = [r for r in results if r.soak]
    if soaks:
        lines += ["", "## Soak: 3 instances x 1,000 every-second jobs, history_size=100, per minute", ""]
        lines += [
            "Every option but `history_size` at its default, so claims are ranked (rank 0 claims at the slot, "
            "a backup only a slot it did not hear decided). "
            "Minute 1 starts at the first whole second after every instance is ready; history passes its size "
            "after 100 s, so from minute 2 on every job's history is trimmed. *missed*: no instance started the "
            "slot within 4 s of the minute's end; *skipped*: the claim found the previous run still holding "
            "its lease. CPU in cores (1.00 = one core busy). Server CPU and RSS: see each backend's note.",
            "",
        ]
        for r in soaks:
            s = r.soak
            assert s is not None
            lines += [f"### {r.name}", "", f"Server figures: {s.server_note}.", ""]
            keys = list(s.rows[0].size) if s.rows else []
            header = ["minute", "runs", "missed", "dup", "skipped", "delay p50 / p99 ms", "CPU instances"]
            header += ["CPU server", "RSS instances MB", "RSS server MB", *keys]
            rows = [
                [
                    str(m.index),
                    f"{m.runs:,} / {m.slots:,}",
                    str(m.missed),
                    str(m.duplicates),
                    str(m.skipped),
                    f"{_f(m.delay_p50_ms)} / {_f(m.delay_p99_ms)}",
                    _f(m.instance_cores, 2),
                    _f(m.server_cores, 2),
                    _f(m.instance_rss_mb),
                    _f(m.server_rss_mb),
                    *[_f(m.size.get(k, math.nan), 1 if k == "MB" else 0) for k in keys],
                ]
                for m in s.rows
            ]
            lines += [*_table(header, rows), ""]
        if chart_name:
            lines += [f"![soak per minute]({chart_name})", ""]
    bursts = [r for r in results if r.bursts]
    if bursts:
        lines += ["## Burst: 10,000 jobs due at the same second (`0,30 * * * * *`), 3 instances", ""]
        lines += ["The first burst after start (which creates every job's row) is not counted.", ""]
        rows = [
            [
                r.name,
                str(k),
                f"{b.runs:,} / {b.jobs:,}",
                str(b.jobs - b.runs),
                str(b.duplicates),
                f"{_f(b.first_start_ms)} / {_f(b.p50_start_ms)} / {_f(b.p99_start_ms)}",
                f"{_f(b.last_start_ms)}{_mark(b.runs == b.jobs and b.last_start_ms <= BURST_TARGET_MS)}",
                _f(b.instance_cpu_s_per_1000, 3),
                _f(b.server_cpu_s_per_1000, 3),
            ]
            for r in bursts
            for k, b in enumerate(r.bursts, 1)
        ]
        header = ["backend", "burst", "started", "missed", "dup", "first / p50 / p99 start ms"]
        header += ["last start ms (goal ≤ 2,000)"]
        lines += [*_table([*header, "CPU s per 1,000 runs, instances", "server"], rows), ""]
    many = [r for r in results if r.many]
    if many:
        lines += ["## One scheduler with 100,000 jobs (100 every minute, the rest daily)", ""]
        rows = []
        for r in many:
            s = r.many
            assert s is not None
            rows.append(
                [
                    r.name,
                    f"{_f(s.rss_empty_mb, 1)} → {_f(s.rss_full_mb, 1)}",
                    f"{_f(s.rss_above_empty_mb, 1)}{_mark(s.rss_above_empty_mb <= MANY_RSS_TARGET_MB)}",
                    _f(s.add_s, 2),
                    _f(s.start_s, 2),
                    f"{_f(s.idle_core_percent, 2)} %{_mark(s.idle_core_percent < IDLE_TARGET_PERCENT)}",
                    _f(s.idle_window_s),
                ]
            )
        header = ["backend", "RSS empty → full MB", "above empty MB (goal ≤ 300)", "add() s", "start() s"]
        lines += [*_table([*header, "idle CPU, share of one core (goal < 2 %)", "measured over s"], rows), ""]
    errors = [(r.name, what, err) for r in results for what, err in r.errors.items()]
    if errors:
        lines += ["## Failures", ""] + [f"- **{n}**, {what}: `{err}`" for n, what, err in errors] + [""]
    return "\n".join(lines)


def soak_chart(results: list[LongResult], path: Path) -> bool:
    """Runs, p99 start delay and backend size per minute, one line per backend."""
    soaks = [(r.name, r.soak) for r in results if r.soak and r.soak.rows]
    if not soaks:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), dpi=100)
    for name, s in soaks:
        assert s is not None
        xs = [m.index for m in s.rows]
        axes[0].plot(xs, [m.runs for m in s.rows], marker="o", label=name)
        axes[1].plot(xs, [m.delay_p99_ms for m in s.rows], marker="o", label=name)
        axes[2].plot(xs, [m.size.get("MB", math.nan) for m in s.rows], marker="o", label=name)
    axes[0].set_title("slots run per minute (of 60,000)")
    axes[1].set_title("p99 start delay, ms")
    axes[1].set_yscale("log")
    axes[2].set_title("backend size, MB (rows/keys/stream)")
    for ax in axes:
        ax.set_xlabel("minute")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylim(bottom=0)
    axes[2].set_ylim(bottom=0)
    fig.suptitle("Soak: 3 instances x 1,000 every-second jobs, history_size=100")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
