"""Servers for the backends' tests from pytest-docker: ``make test-docker`` (``pytest -p scripts.docker_services``).

For each backend whose tests are collected and whose ``ANARCHON_*`` variable
is unset (a variable that points at a running server wins, as without this
plugin), its service in ``docker-compose.yml`` is started through
pytest-docker's ``docker_services`` in a compose project of its own
(``anarchon-test-<run>-<pid>``), on a free port of 127.0.0.1; waited on until its
healthcheck passes (a real query: ``redis-cli ping``, ``pg_isready``,
``rabbitmq-diagnostics``, JetStream's ``/healthz``), at most
``ANARCHON_DOCKER_READY_S`` seconds (180); and its URL put in the variable.
A command the tests run against the server (``rabbitmqctl``, the manifest's
``tools``) runs inside its container, through a shim first on ``PATH``.
pytest-docker removes everything (``down -v``) when the session ends, also
when a test failed; an interrupted run is cleaned up by ``pytest_unconfigure``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from scripts.backends import ROOT, Manifest, load
from scripts.docker_images import resolve

__all__ = ["ServiceNotReady", "compose_command", "wait_ready"]

READY_TIMEOUT_S = float(os.environ.get("ANARCHON_DOCKER_READY_S", "180"))
#: One compose project per pytest process; ANARCHON_DOCKER_RUN (set by make test-docker) groups a run's
#: projects, so scripts/docker-sweep.sh checks this run's leftovers and no one else's.
PROJECT = f"anarchon-test-{os.environ.get('ANARCHON_DOCKER_RUN', 'solo')}-{os.getpid()}"
#: What this session started, for the summary: (service, url, image).
_STARTED: list[tuple[str, str, str]] = []


class ServiceNotReady(RuntimeError):
    """A service's container never passed its healthcheck; the message holds its last log lines."""


def compose_command() -> str:
    """``docker-compose`` (1.x) where installed, else the ``docker compose`` plugin (2.x)."""
    return "docker-compose" if shutil.which("docker-compose") else "docker compose"


def _compose(files: list[str], project: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [*shlex.split(compose_command()), *(a for f in files for a in ("-f", f)), "-p", project, *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def wait_ready(files: list[str], project: str, service: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Return once ``service``'s container reports healthy; raise :class:`ServiceNotReady` otherwise.

    Fails at once when the container exits or its healthcheck gives up
    (``unhealthy``), and after ``timeout_s`` when it is still starting.
    """
    deadline = time.monotonic() + timeout_s
    status = "not created"
    while True:
        container = _compose(files, project, "ps", "-q", service).stdout.strip()
        if container:
            found = subprocess.run(
                [
                    "docker",
                    "inspect",
                    "-f",
                    "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}",
                    container,
                ],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            state, health = [*found, "", ""][:2]
            status = f"container {state or 'gone'}, health {health or 'unknown'}"
            if state == "running" and health == "healthy":
                return
            if state in ("exited", "dead") or health == "unhealthy":
                break
        if time.monotonic() > deadline:
            status += f", after {timeout_s:.0f} s"
            break
        time.sleep(0.5)
    logs = _compose(files, project, "logs", "--no-color", "--tail", "20", service).stdout.strip()
    raise ServiceNotReady(
        f"docker service {service!r} (compose project {project}) is not ready: {status}. Its last log lines:\n"
        f"{logs or '(none)'}\n"
        f"Run `{compose_command()} -p {project} logs {service}` while it runs, or raise ANARCHON_DOCKER_READY_S."
    )


def _wanted(items: Sequence[Any], manifests: list[Manifest]) -> list[Manifest]:
    """The backends whose tests are among ``items``, with a service and no server named in their variable."""
    folders = {_folder(item.path) for item in items}
    return [m for m in manifests if m.service and m.folder in folders and not os.environ.get(m.service["env"])]


def _folder(path: Path) -> str | None:
    """The backend folder under ``packages/`` that holds ``path``, if any."""
    try:
        parts = path.resolve().relative_to(ROOT).parts
    except ValueError:
        return None
    return parts[1] if len(parts) > 1 and parts[0] == "packages" else None


def _shims(folder: Path, files: list[str], wanted: list[Manifest], project: str = PROJECT) -> None:
    """``tool`` on PATH runs ``tool`` in the service's container (``docker exec``)."""
    for m in wanted:
        assert m.service is not None
        container = _compose(files, project, "ps", "-q", m.name).stdout.strip()
        for tool in m.service.get("tools", []):
            shim = folder / tool
            shim.write_text(f'#!/bin/sh\nexec docker exec -i {container} {shlex.quote(tool)} "$@"\n')
            shim.chmod(0o755)


def _shim_folder(project: str) -> Path:
    return Path(tempfile.gettempdir()) / f"{project}-shims"


def _up(project: str, github: bool) -> None:
    """``make services-docker``: every service, started and waited on; prints the exports.

    With ``github``, writes them to the GitHub Actions files ``$GITHUB_ENV`` and ``$GITHUB_PATH`` instead.
    """
    files = [str(ROOT / "docker-compose.yml")]
    manifests = [m for m in load() if m.service]
    os.environ.update(resolve(manifests))
    started = _compose(files, project, "up", "-d")
    if started.returncode != 0:
        raise SystemExit(f"docker_services: `up` failed:\n{started.stderr}")
    variables = {}
    for m in manifests:
        assert m.service is not None
        wait_ready(files, project, m.name)
        found = _compose(files, project, "port", m.name, str(m.service["container_port"])).stdout.strip()
        port = found.splitlines()[-1].rsplit(":", 1)[-1]
        variables[m.service["env"]] = str(m.service["docker_url"]).format(port=port)
    shims = _shim_folder(project)
    shims.mkdir(exist_ok=True)
    _shims(shims, files, manifests, project)
    if github:
        with open(os.environ["GITHUB_ENV"], "a") as env, open(os.environ["GITHUB_PATH"], "a") as path:
            env.writelines(f"{k}={v}\n" for k, v in variables.items())
            path.write(f"{shims}\n")
        return
    for variable, url in variables.items():
        print(f"export {variable}={url}")
    print(f'export PATH={shims}:"$PATH"')


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m scripts.docker_services", description="make services-docker")
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--project", default="anarchon-dev")
    p.add_argument("--github", action="store_true", help="write $GITHUB_ENV and $GITHUB_PATH instead of printing")
    args = p.parse_args(argv)
    if args.action == "up":
        _up(args.project, args.github)
    else:
        _compose([str(ROOT / "docker-compose.yml")], args.project, "down", "-v", "--remove-orphans")
        shutil.rmtree(_shim_folder(args.project), ignore_errors=True)
    return 0


#: Per backend served here: (tests deselected, tests kept), for the summary.
_DESELECTED: dict[str, tuple[int, int]] = {}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep, of a served backend's tests, those that use its server (the manifest's ``[service] fixture``).

    The others are pure tests or start servers of their own (a cluster, a
    replica, Sentinel): against a container they would prove nothing that
    ``make test`` did not, at the cost of minutes. ``ANARCHON_DOCKER_ALL=1``
    keeps every test.
    """
    if os.environ.get("ANARCHON_DOCKER_ALL") == "1":
        return
    served = [m for m in _wanted(items, load()) if m.service and m.service.get("fixture")]
    fixtures = {m.folder: m.service["fixture"] for m in served if m.service}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        folder = _folder(item.path)
        if folder not in fixtures:
            keep.append(item)
            continue
        uses = fixtures[folder] in getattr(item, "fixturenames", ())
        (keep if uses else drop).append(item)
        gone, kept = _DESELECTED.get(folder, (0, 0))
        _DESELECTED[folder] = (gone, kept + 1) if uses else (gone + 1, kept)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_configure(config: pytest.Config) -> None:
    # Registered now, after pytest-docker's entry point, so that these fixtures override its defaults.
    config.pluginmanager.import_plugin("scripts.docker_fixtures")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for folder, (gone, kept) in sorted(_DESELECTED.items()):
        terminalreporter.write_line(
            f"anarchon docker: {folder}: {kept} test(s) against the container, {gone} deselected (they use no "
            "server of it: pure tests, or servers of their own, which make test runs; ANARCHON_DOCKER_ALL=1 keeps them)"
        )
    for name, url, image in _STARTED:
        terminalreporter.write_line(f"anarchon docker: {name} at {url} ({image}, compose project {PROJECT})")


def pytest_unconfigure(config: pytest.Config) -> None:
    """An interrupted session may skip fixture teardown: remove this run's project whatever happened."""
    if _compose([str(ROOT / "docker-compose.yml")], PROJECT, "ps", "-q").stdout.strip():
        _compose([str(ROOT / "docker-compose.yml")], PROJECT, "down", "-v", "--remove-orphans")


if __name__ == "__main__":
    raise SystemExit(main())
