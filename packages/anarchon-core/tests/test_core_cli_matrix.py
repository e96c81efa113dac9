"""The README's `make test` command: ANARCHON_STEPS refuses a step it does not know, listing the known ones.

Runs in the repository only (scripts/ is not part of a distribution). PYTHON=true
stands in for the interpreter, so a step that is picked runs nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "test-matrix.sh"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="scripts/test-matrix.sh is not here (not a checkout)")


def _steps() -> list[str]:
    """The step names as the script declares them: its STEPS array, then one per backend manifest."""
    body = SCRIPT.read_text().split("STEPS=(", 1)[1].split(")", 1)[0]
    lines = [line.strip().strip('"') for line in body.splitlines() if line.strip()]
    manifests = [sys.executable, str(SCRIPT.parent / "backends.py"), "steps"]
    lines += subprocess.run(manifests, capture_output=True, text=True, check=True).stdout.splitlines()
    return [line.split("|", 1)[0] for line in lines]


def _matrix(steps: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANARCHON_STEPS": steps, "PYTHON": "true"}
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("steps", ["chaos", "core,nope", "Core", ","])
def test_an_unknown_step_exits_2_and_lists_the_steps(steps: str) -> None:
    result = _matrix(steps)
    assert result.returncode == 2
    names = _steps()
    assert {"core", "faults", "release", "sqlite", "redis"} <= set(names)
    assert f"the steps are: {', '.join(names)}" in result.stderr
    assert "::: step" not in result.stdout  # nothing ran
    if steps == "chaos":  # CONTRIBUTING once called the fault step so
        assert "the fault suite's step is 'faults'" in result.stderr


def test_known_steps_run_and_only_those() -> None:
    result = _matrix("core, faults")
    assert result.returncode == 0, result.stderr
    ran = [line.split()[2].rstrip(":") for line in result.stdout.splitlines() if ": pytest " in line]
    assert sorted(ran) == ["core", "faults"]  # side by side: reported as each ends


def _fake_pytest(tmp_path: Path) -> Path:
    """A stand-in for ``python``: notes when each step starts and ends, waits for a sibling, says it passed."""
    script = tmp_path / "fake-python"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "start $*" >> {tmp_path}/stamps\n'
        # Each step waits (up to 3 s) until two have started: only overlapping steps end quickly.
        f"for _ in $(seq 30); do [ $(grep -c ^start {tmp_path}/stamps) -ge 2 ] && break; sleep 0.1; done\n"
        f'echo "end $*" >> {tmp_path}/stamps\n'
        'echo "1 passed in 0.1s"\n'
    )
    script.chmod(0o755)
    return script


def test_steps_run_side_by_side_in_lanes_and_their_outputs_stay_whole(tmp_path: Path) -> None:
    env = {**os.environ, "ANARCHON_STEPS": "web,recipes", "ANARCHON_JOBS": "2", "PYTHON": str(_fake_pytest(tmp_path))}
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    stamps = (tmp_path / "stamps").read_text().split("\n")
    assert [s.split()[0] for s in stamps if s][:2] == ["start", "start"]  # both began before either ended
    assert result.stdout.rstrip().endswith("2 passed, 0 failed, 0 skipped")


def test_one_lane_runs_the_steps_one_after_another(tmp_path: Path) -> None:
    env = {**os.environ, "ANARCHON_STEPS": "web,recipes", "ANARCHON_JOBS": "1", "PYTHON": str(_fake_pytest(tmp_path))}
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    kinds = [s.split()[0] for s in (tmp_path / "stamps").read_text().split("\n") if s]
    assert kinds == ["start", "end", "start", "end"]


@pytest.mark.parametrize("jobs", ["0", "two", "-1"])
def test_a_lane_count_that_is_no_positive_number_exits_2(jobs: str) -> None:
    env = {**os.environ, "ANARCHON_STEPS": "core", "ANARCHON_JOBS": jobs, "PYTHON": "true"}
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 2
    assert f"ANARCHON_JOBS={jobs} is not a positive whole number" in result.stderr


def test_brokers_in_docker_change_only_the_backend_steps(tmp_path: Path) -> None:
    """ANARCHON_BROKERS=docker: a backend step gets the docker plugin and no ANARCHON_* server; the rest keep theirs."""
    script = tmp_path / "fake-python"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$* redis=${{ANARCHON_REDIS_URL:-unset}} all=${{ANARCHON_DOCKER_ALL:-unset}}" >> {tmp_path}/stamps\n'
        'echo "1 passed in 0.1s"\n'
    )
    script.chmod(0o755)
    env = {
        **os.environ,
        "ANARCHON_STEPS": "redis,web",
        "ANARCHON_BROKERS": "docker",
        "ANARCHON_REDIS_URL": "redis://127.0.0.1:6379/0",
        "PYTHON": str(script),
    }
    env.pop("ANARCHON_DOCKER_ALL", None)
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "stamps").read_text().splitlines()
    (redis,) = [line for line in lines if "packages/anarchon-redis" in line]
    (web,) = [line for line in lines if "packages/anarchon-web" in line]
    assert redis.startswith("-m pytest -p scripts.docker_services packages/anarchon-redis")
    assert redis.endswith("redis=unset all=1")  # every test of the step, once, against the container
    assert web.startswith("-m pytest packages/anarchon-web")
    assert "redis=redis://127.0.0.1:6379/0" in web


def test_brokers_that_are_neither_loopback_nor_docker_exit_2() -> None:
    env = {**os.environ, "ANARCHON_STEPS": "core", "ANARCHON_BROKERS": "podman", "PYTHON": "true"}
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 2
    assert "ANARCHON_BROKERS=podman is neither loopback" in result.stderr
