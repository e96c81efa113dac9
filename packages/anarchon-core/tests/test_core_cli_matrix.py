"""The README's `make test` command: ANARCHON_STEPS refuses a step it does not know, listing the known ones.

Runs in the repository only (scripts/ is not part of a distribution). PYTHON=true
stands in for the interpreter, so a step that is picked runs nothing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "test-matrix.sh"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="scripts/test-matrix.sh is not here (not a checkout)")


def _steps() -> list[str]:
    """The step names as the script's STEPS array declares them ("name:paths" lines)."""
    body = SCRIPT.read_text().split("STEPS=(", 1)[1].split(")", 1)[0]
    return [line.strip().strip('"').split(":", 1)[0] for line in body.splitlines() if line.strip()]


def _matrix(steps: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANARCHON_STEPS": steps, "PYTHON": "true"}
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("steps", ["chaos", "core,nope", "Core", ","])
def test_an_unknown_step_exits_2_and_lists_the_steps(steps: str) -> None:
    result = _matrix(steps)
    assert result.returncode == 2
    names = _steps()
    assert {"core", "faults", "release"} <= set(names)
    assert f"the steps are: {', '.join(names)}" in result.stderr
    assert "::: step" not in result.stdout  # nothing ran
    if steps == "chaos":  # CONTRIBUTING once called the fault step so
        assert "the fault suite's step is 'faults'" in result.stderr


def test_known_steps_run_and_only_those() -> None:
    result = _matrix("core, faults")
    assert result.returncode == 0, result.stderr
    ran = [line.split()[2].rstrip(":") for line in result.stdout.splitlines() if ": pytest " in line]
    assert ran == ["core", "faults"]
