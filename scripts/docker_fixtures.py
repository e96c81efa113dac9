"""pytest-docker's settings for this repository, and the fixture that starts the backends' servers.

Loaded by :mod:`scripts.docker_services` after pytest-docker, so these override its defaults.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from scripts.backends import ROOT, Manifest, image_variable, load
from scripts.docker_images import resolve
from scripts.docker_services import _STARTED, PROJECT, _shims, _wanted, compose_command, wait_ready


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    return compose_command()


@pytest.fixture(scope="session")
def docker_compose_file() -> list[str]:
    return [str(ROOT / "docker-compose.yml")]


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return PROJECT


@pytest.fixture(scope="session")
def anarchon_docker_wanted(request: pytest.FixtureRequest) -> list[Manifest]:
    return _wanted(request.session.items, load())


@pytest.fixture(scope="session")
def docker_setup(anarchon_docker_wanted: list[Manifest]) -> list[str]:
    # Compose 1.x has no `up --wait`: anarchon_docker_servers waits on the healthchecks itself.
    return [f"up -d {' '.join(m.name for m in anarchon_docker_wanted)}"]


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    return ["down -v --remove-orphans"]


@pytest.fixture(scope="session", autouse=True)
def anarchon_docker_servers(
    request: pytest.FixtureRequest, anarchon_docker_wanted: list[Manifest], tmp_path_factory: Any
) -> Iterator[None]:
    """Start the wanted backends' services, wait for each, point their variables at them (see the plugin)."""
    if not anarchon_docker_wanted:
        yield
        return
    saved = dict(os.environ)
    os.environ.update(resolve(anarchon_docker_wanted))  # the images docker-compose.yml names
    services = request.getfixturevalue("docker_services")
    files = request.getfixturevalue("docker_compose_file")
    for m in anarchon_docker_wanted:
        assert m.service is not None
        wait_ready(files, PROJECT, m.name)
        port = services.port_for(m.name, int(m.service["container_port"]))
        os.environ[m.service["env"]] = str(m.service["docker_url"]).format(port=port)
        _STARTED.append((m.name, os.environ[m.service["env"]], os.environ[image_variable(m)]))
    shims = tmp_path_factory.mktemp("docker-shims")
    _shims(shims, files, anarchon_docker_wanted)
    os.environ["PATH"] = f"{shims}{os.pathsep}{os.environ['PATH']}"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
