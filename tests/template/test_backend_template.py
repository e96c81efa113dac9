"""examples/backend-template as a third party has it: out of the tree, against anarchon-core and conformance only.

scripts/template-check.sh copies the template to a temporary folder, installs
it in a fresh virtualenv beside anarchon-core and anarchon-conformance built
from this checkout (nothing else of anarchon), checks that `anarchon backends`
lists it, and runs its conformance suite there. About a minute.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_template_passes_the_conformance_suite_installed_out_of_the_tree() -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "template-check.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-6000:]
    assert "backend 'folder' (anarchon_folder.backend.FolderBackend), claim tier" in out
    summary = re.search(r"(\d+) passed(?:, (\d+) skipped)?", out)
    assert summary is not None, out[-3000:]
    assert int(summary.group(1)) >= 60  # the claim tier's share of the suite, fleet tests included
    assert " failed" not in out.splitlines()[-1]
