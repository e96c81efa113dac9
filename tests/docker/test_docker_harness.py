"""The harness of `make test-docker` (scripts/docker_services.py, scripts/docker_images.py) on a real Docker.

A service that never becomes ready must fail with the service's name and its
last log lines, within a bounded time, and leave nothing behind; a variable
that already names a server keeps its backend out of Docker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pytest_docker.plugin import get_docker_services

from scripts.backends import load
from scripts.docker_images import base_image
from scripts.docker_services import PROJECT, ServiceNotReady, _wanted, compose_command, wait_ready

ROOT = Path(__file__).resolve().parents[2]


def _docker_answers() -> bool:
    return shutil.which("docker") is not None and (
        subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    )


pytestmark = pytest.mark.skipif(
    not _docker_answers() and not os.environ.get("CI"),
    reason="no Docker daemon answers here (CONTRIBUTING: With Docker); CI starts one",
)


def _left(project: str) -> str:
    return subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _one_service(tmp_path: Path, name: str, script: str, healthcheck: str) -> tuple[list[str], str, Any]:
    """A compose file of one service on the Debian base running ``script``; its files, project and services."""
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(
        f"services:\n  {name}:\n    image: {base_image()}\n"
        f'    command: ["sh", "-c", "{script}"]\n'
        f"    healthcheck:\n      test: {healthcheck}\n      interval: 1s\n      retries: 1000\n"
    )
    project = f"{PROJECT}-{name}"
    return (
        [str(compose)],
        project,
        get_docker_services(compose_command(), [str(compose)], project, ["up -d"], ["down -v"]),
    )


def test_a_service_that_never_becomes_ready_fails_naming_it_with_its_last_log_lines(tmp_path: Path) -> None:
    script = "echo stuck is starting; echo waiting for a disk that never comes; sleep 600"
    files, project, services = _one_service(tmp_path, "stuck", script, '["CMD", "false"]')
    began = time.monotonic()
    with pytest.raises(ServiceNotReady) as error, services:
        wait_ready(files, project, "stuck", timeout_s=6)
    took = time.monotonic() - began
    text = str(error.value)
    assert "'stuck'" in text
    assert "health starting, after 6 s" in text
    assert "waiting for a disk that never comes" in text  # the container's own log
    assert took < 6 + 60  # bounded: the wait, plus starting and removing one container
    assert _left(project) == ""  # pytest-docker's down ran although the wait raised


def test_a_container_that_exits_fails_at_once_not_at_the_timeout(tmp_path: Path) -> None:
    files, project, services = _one_service(tmp_path, "crashes", "echo FATAL: bad config; exit 3", '["CMD", "true"]')
    began = time.monotonic()
    with pytest.raises(ServiceNotReady, match=r"(?s)'crashes'.*container exited.*FATAL: bad config"), services:
        wait_ready(files, project, "crashes", timeout_s=120)
    assert time.monotonic() - began < 60
    assert _left(project) == ""


def test_a_variable_that_names_a_server_keeps_its_backend_out_of_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    manifests = load()
    items = [SimpleNamespace(path=ROOT / "packages" / m.folder / "tests" / "test_x.py") for m in manifests]
    session = SimpleNamespace(items=items)
    for m in manifests:
        if m.service:
            monkeypatch.delenv(m.service["env"], raising=False)
    every = [m.name for m in _wanted(session.items, manifests)]
    assert every == [m.name for m in manifests if m.service]
    monkeypatch.setenv("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0")
    assert "redis" not in [m.name for m in _wanted(session.items, manifests)]
    only_pg = SimpleNamespace(items=[SimpleNamespace(path=ROOT / "packages" / "anarchon-postgres" / "tests" / "t.py")])
    assert [m.name for m in _wanted(only_pg.items, manifests)] == ["postgres"]
