"""The result table, for the terminal and for ``chaos/results/REPORT.md``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .judge import Verdict

__all__ = ["markdown", "table"]

COLUMNS = [
    "backend",
    "kind",
    "slots",
    "runs",
    "dup",
    "re-run",
    "take-overs (median/max ms)",
    "hand-overs (ms)",
    "caught up",
    "skipped (overlap)",
    "abandoned (next slot not run)",
    "lost (a) runner died",
    "lost (b) otherwise",
    "excluded",
    "faults",
    "verdict",
]


def _ms(values: Sequence[int]) -> str:
    if not values:
        return "0"
    return f"{len(values)} ({int(statistics.median(values))}/{max(values)})"


def _faults(v: Verdict) -> str:
    return " ".join(f"{k} x{n}" for k, n in sorted(v.faults.items())) or "-"


def _row(v: Verdict) -> list[str]:
    if v.error:
        return [v.backend, v.kind, *["-"] * (len(COLUMNS) - 4), _faults(v), f"ERROR: {v.error.splitlines()[0][:120]}"]
    lost_b = str(v.lost_other_total)
    return [
        v.backend,
        v.kind,
        str(v.slots),
        str(v.runs),
        str(len(v.duplicates)),
        str(len(v.re_runs)),
        _ms(v.take_over_ms),
        _ms(v.hand_over_ms),
        f"{v.catch_up_runs} runs / {v.coalesced} slots",
        str(v.skipped_overlap),
        f"{v.abandoned} ({v.abandoned_chains})",
        str(v.lost_died) if v.kind == "claim" else "n/a",
        lost_b,
        str(sum(v.excluded.values())),
        _faults(v),
        "PASS" if v.passed else "FAIL",
    ]


def table(verdicts: Sequence[Verdict]) -> str:
    rows = [COLUMNS, *(_row(v) for v in verdicts)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(verdicts: Sequence[Verdict], header: str, glossary: str) -> str:
    out = [f"# anarchon fault suite — {header}", "", "| " + " | ".join(COLUMNS) + " |"]
    out.append("|" + "---|" * len(COLUMNS))
    out += ["| " + " | ".join(c.replace("|", "/") for c in _row(v)) + " |" for v in verdicts]
    for v in verdicts:
        out += ["", f"## {v.backend} ({v.kind}) — {'PASS' if v.passed else 'FAIL'} in {v.seconds} s", ""]
        out += [f"- {n}" for n in v.notes]
        if v.lost_other:
            out.append("- lost (b) by cause: " + ", ".join(f"{k}: {n}" for k, n in v.lost_other.most_common()))
        if v.excluded:
            out.append("- excluded from the judgement: " + ", ".join(f"{k}: {n}" for k, n in v.excluded.most_common()))
        if v.take_over_ms:
            out.append(f"- take-over times (ms): {', '.join(map(str, sorted(v.take_over_ms)))}")
        if v.hand_over_ms:
            out.append(f"- hand-over times (ms, from the release): {', '.join(map(str, sorted(v.hand_over_ms)))}")
        sections = (
            ("Broken promises", v.broken),
            ("Duplicates", v.duplicates),
            ("Within the rules, worth a look", v.warnings),
            ("Re-runs", v.re_runs),
        )
        for title, items in sections:
            if items:
                out += ["", f"**{title}** ({len(items)}):", ""]
                out += [f"- `{i}`" for i in items[:25]]
                if len(items) > 25:
                    out.append(f"- … {len(items) - 25} more")
        if v.plan:
            out += ["", "Fault plan:", "", "```", *v.plan, "```"]
        if v.error:
            out += ["", f"Error: `{v.error}`"]
        if v.workdir:
            out.append(f"\nLogs and ledger: `{v.workdir}`")
    out += ["", "## Glossary", "", glossary.strip(), ""]
    return "\n".join(out)
