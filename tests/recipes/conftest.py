"""Fixtures for the recipes' tests: a real backend per test (a new SQLite file, or the shared Redis).

``backend_url`` is parametrised over SQLite and Redis; a recipe reads it from
``ANARCHON_BACKEND``, as in production. On the shared Redis the recipes use
the default key prefix, so each test deletes the keys of the recipe jobs it
names, before and after (never anything else). Redis unreachable: skipped
with a loud reason, or a failure under ``CI=true``.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "examples" / "recipes"
REDIS_URL = os.environ.get("ANARCHON_REDIS_URL", "redis://127.0.0.1:6379/0")

#: Every job name a recipe defines; keys of jobs named so (or so plus a suffix) are what a Redis test may delete.
RECIPE_JOBS = (
    "flask-cleanup",
    "gunicorn-heartbeat",
    "fastapi-refresh",
    "service-heartbeat",
    "service-nightly",
    "django-heartbeat",
    "report-tenant-",
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set, so this must not be skipped: {reason}")
    pytest.skip(f"!!! SKIPPED: {reason}")


def _drop_recipe_keys() -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        for job in RECIPE_JOBS:
            keys = list(client.scan_iter(match=f"cron:{{{job}*"))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(params=["sqlite", "redis"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'anarchon.sqlite3'}"
        return
    import redis

    try:
        _drop_recipe_keys()
    except redis.RedisError as exc:
        _unavailable(f"no Redis at {REDIS_URL} ({exc}); start one or set ANARCHON_REDIS_URL")
    try:
        yield REDIS_URL
    finally:
        _drop_recipe_keys()


@pytest.fixture
def load_recipe(monkeypatch: pytest.MonkeyPatch, backend_url: str) -> Callable[[str], ModuleType]:
    """Import a recipe module afresh with ANARCHON_BACKEND set, as a process of the application would."""
    monkeypatch.setenv("ANARCHON_BACKEND", backend_url)
    monkeypatch.syspath_prepend(str(RECIPES))

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"recipe_{name}_{os.urandom(3).hex()}", RECIPES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def recipe_env(backend_url: str) -> Callable[..., dict[str, str]]:
    """The environment of a recipe's own process: this one's, pointed at the backend."""

    def make(**extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANARCHON_")}
        env.update(ANARCHON_BACKEND=backend_url, PYTHONUNBUFFERED="1", **extra)
        return env

    return make


def _wait_for(predicate: Callable[[], Any], what: str, deadline_s: float = 30.0) -> Any:
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline_s} s: {what}")
        time.sleep(0.1)


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    """Poll a condition outside this process (a file, a table) until it holds, or fail saying what."""
    return _wait_for


@pytest.fixture
def heartbeats(tmp_path: Path) -> Callable[[], list[list[str]]]:
    """The lines a recipe's heartbeat job appended to ``tmp_path/heartbeats.log``, split."""
    path = tmp_path / "heartbeats.log"

    def read() -> list[list[str]]:
        if not path.exists():
            return []
        return [line.split() for line in path.read_text().splitlines() if line.strip()]

    return read
