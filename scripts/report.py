"""One current report per folder (benchmarks/results/REPORT.md, chaos/results/REPORT.md), a section per run kind.

A harness run rewrites its own section, between ``<!-- section: KEY -->`` and
``<!-- end: KEY -->``, and leaves the others as they were: the file always
holds the newest figures of each kind, each with its date, machine and
command, and git holds the older ones.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["BENCHMARK_INTRO", "FAULT_INTRO", "write_section"]

BENCHMARK_INTRO = """# Benchmark report: the current figures

One section per kind of run of `python -m benchmarks` (`make bench`), each
with its date, machine and the command that made it; a run rewrites its own
section (`scripts/report.py`) and git keeps the older figures. Charts are the
`.png` files beside this one.
"""
FAULT_INTRO = """# Fault report: the current figures

One section per kind of run of the fault suite (`python -m chaos`, `make
chaos`; `python -m chaos.failover`, `make chaos-failover`), each with its
date, machine and command; a run rewrites its own section
(`scripts/report.py`) and git keeps the older ones.
"""


def _demoted(page: str, levels: int) -> str:
    """The page's headings ``levels`` down, so that its ``#`` title sits under the section's ``##``."""
    out, fenced = [], False
    for line in page.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        out.append("#" * levels + line if not fenced and re.match(r"#{1,4} ", line) else line)
    return "\n".join(out)


def write_section(report: Path, key: str, label: str, page: str, intro: str) -> None:
    """Put ``page`` (a whole Markdown page of one run) in ``report`` as section ``key``, titled ``label``.

    The section replaces the previous one of that key; a report not yet there starts with ``intro``.
    """
    begin, end = f"<!-- section: {key} -->", f"<!-- end: {key} -->"
    section = f"{begin}\n## {label}\n\n{_demoted(page, 2).strip()}\n{end}"
    text = report.read_text() if report.exists() else intro.rstrip("\n") + "\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    report.write_text(text)
