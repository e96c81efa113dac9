"""make test-docker keeps, of a backend's step, the tests that use its server (scripts/docker_services.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def collected(*paths: str, **env: str) -> tuple[set[str], str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ANARCHON_")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "scripts.docker_services", "-p",
         "no:cacheprovider", *paths],
        cwd=ROOT, capture_output=True, text=True, env={**environ, **env}, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return {line.split("[")[0] for line in result.stdout.splitlines() if "::" in line}, result.stdout


def test_tests_without_the_server_fixture_are_deselected_and_counted() -> None:
    url = "packages/anarchon-redis/tests/test_redis_url.py"
    pure = f"{url}::test_unknown_query_keys_are_refused_with_the_accepted_ones"  # parses a URL, no server
    served = f"{url}::test_the_query_prefix_never_reaches_redis_py"  # reads and writes the server
    names, out = collected(url)
    everything, _ = collected(url, ANARCHON_DOCKER_ALL="1")
    assert served in names and pure not in names and pure in everything, sorted(names)
    ours = re.search(r"anarchon docker: anarchon-redis: \d+ test\(s\) against the container, (\d+) deselected", out)
    pytests = re.search(r"\((\d+) deselected\)", out)
    assert ours and pytests and ours.group(1) == pytests.group(1) != "0", out


def test_docker_all_keeps_every_test() -> None:
    names, _ = collected("packages/anarchon-redis/tests/test_redis_url.py", ANARCHON_DOCKER_ALL="1")
    assert names and all(n.startswith("packages/anarchon-redis/tests/test_redis_url.py") for n in names)


def test_a_backend_served_by_its_variable_is_not_filtered() -> None:
    names, _ = collected(
        "packages/anarchon-redis/tests/test_redis_url.py", ANARCHON_REDIS_URL="redis://127.0.0.1:6379/0"
    )
    assert names
