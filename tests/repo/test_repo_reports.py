"""One current report per folder (benchmarks/results, chaos/results): REPORT.md, a section per kind of run."""

from __future__ import annotations

import re
from pathlib import Path

from scripts.report import write_section

ROOT = Path(__file__).resolve().parents[2]


def test_each_results_folder_holds_one_report_whose_sections_say_date_and_command() -> None:
    for folder in ("benchmarks/results", "chaos/results"):
        reports = sorted(p.name for p in (ROOT / folder).glob("*.md"))
        assert reports == ["REPORT.md"], f"{folder} holds {reports}: one current report, git keeps the older"
        text = (ROOT / folder / "REPORT.md").read_text()
        keys = re.findall(r"<!-- section: ([a-z-]+) -->", text)
        assert keys and len(keys) == len(set(keys)) == len(re.findall(r"<!-- end: [a-z-]+ -->", text))
        for key in keys:
            section = text.split(f"<!-- section: {key} -->", 1)[1].split(f"<!-- end: {key} -->", 1)[0]
            assert re.search(r"20\d\d-\d\d-\d\d", section), f"{folder} section {key} has no date"


def test_a_run_rewrites_its_own_section_and_leaves_the_others(tmp_path: Path) -> None:
    report = tmp_path / "REPORT.md"
    write_section(report, "soak", "Soak", "# soak, 2026-12-01\n\n| a |\n```\n# not a heading\n```\n", "# Report\n")
    write_section(report, "burst", "Burst", "# burst, 2026-12-01\nfirst\n", "# Report\n")
    write_section(report, "soak", "Soak", "# soak, 2026-12-05\nnewer\n", "# Report\n")
    text = report.read_text()
    assert text.startswith("# Report\n")
    assert text.count("<!-- section: soak -->") == 1 and "2026-12-01\n\n| a |" not in text
    assert "### soak, 2026-12-05\nnewer" in text  # the run's title sits under the section's heading
    assert "### burst, 2026-12-01\nfirst" in text
    assert text.index("section: soak") < text.index("section: burst")  # kept in place, not moved to the end
    write_section(report, "x", "X", "# x\n```\n# inside a fence\n```\n", "# Report\n")
    assert "\n# inside a fence\n" in report.read_text()
