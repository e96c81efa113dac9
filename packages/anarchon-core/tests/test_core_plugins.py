"""Discovery through entry points, URL schemes, lazy imports and hook specs."""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import ClassVar

import pytest

import anarchon
from anarchon import (
    Backend,
    BackendNotInstalledError,
    Capabilities,
    MemoryBackend,
    Scheduler,
    hookimpl,
    hookspecs,
)
from anarchon.plugins import PluginManager


def test_memory_backend_registers_through_the_entry_point_group() -> None:
    manager = PluginManager()
    assert manager.backends()["memory"] is MemoryBackend
    assert manager.pluggy.get_plugin("memory") is not None, "memory must come from the 'anarchon' entry point"


def test_url_scheme_chooses_the_backend() -> None:
    assert isinstance(Scheduler(backend="memory://").backend, MemoryBackend)


def test_unknown_scheme_lists_installed_schemes_and_names_the_package() -> None:
    with pytest.raises(BackendNotInstalledError) as info:
        Scheduler(backend="kafka://broker:9092")
    message = str(info.value)
    assert "'kafka'" in message and "installed schemes:" in message and "memory" in message
    assert isinstance(info.value, ImportError)


def test_known_but_missing_scheme_says_what_to_install() -> None:
    manager = PluginManager(entry_points=False)  # as if only anarchon-core were installed
    with pytest.raises(BackendNotInstalledError, match="pip install anarchon-redis"):
        manager.backend_from_url("redis://:s3cret@cache:6379/0")


def test_password_in_an_unknown_url_is_not_repeated() -> None:
    with pytest.raises(BackendNotInstalledError) as info:
        Scheduler(backend="kafka://user:s3cret@broker:9092")
    assert "s3cret" not in str(info.value)


def test_missing_backend_distribution_raises_import_error_with_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(anarchon.distributions.FIRST_PARTY, "GhostBackend", ("anarchon_ghost", "anarchon-ghost"))
    with pytest.raises(ImportError, match="pip install anarchon-ghost") as info:
        anarchon.GhostBackend  # noqa: B018
    assert isinstance(info.value, BackendNotInstalledError)


def test_missing_backend_in_a_fresh_interpreter() -> None:
    code = (
        "import sys; sys.modules['anarchon_rabbitmq'] = None\n"
        "try:\n    from anarchon import RabbitMQBackend\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install anarchon-rabbitmq" in out


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        anarchon.NoSuchThing  # noqa: B018


def test_a_plugin_can_add_a_backend_and_duplicate_names_are_refused() -> None:
    class Other(MemoryBackend):
        name: ClassVar[str] = "other"
        url_schemes: ClassVar[tuple[str, ...]] = ("other",)

    class Plugin:
        @hookimpl
        def anarchon_register_backends(self) -> list[type[Backend]]:
            return [Other]

    assert isinstance(Scheduler(backend="other://x", plugins=[Plugin()]).backend, Other)

    class Clash(MemoryBackend):
        capabilities: ClassVar[Capabilities] = Capabilities(lease=True, history_ttl=False)

    class ClashPlugin:
        @hookimpl
        def anarchon_register_backends(self) -> list[type[Backend]]:
            return [Clash]

    with pytest.raises(RuntimeError, match="two plugins register a backend named 'memory'"):
        PluginManager([ClashPlugin()]).backends()


def test_a_misspelt_hook_fails_loudly() -> None:
    class Typo:
        @hookimpl
        def anarchon_run_finshed(self, run: object) -> None:
            pass

    with pytest.raises(Exception, match="anarchon_run_finshed"):
        Scheduler(MemoryBackend(), plugins=[Typo()])


def test_every_hook_is_documented_with_its_signature() -> None:
    hooks = [getattr(hookspecs, n) for n in dir(hookspecs) if n.startswith("anarchon_")]
    assert len(hooks) >= 9
    for hook in hooks:
        assert (hook.__doc__ or "").strip(), f"{hook.__name__} has no docstring"
        assert inspect.signature(hook).return_annotation != inspect.Signature.empty


def test_public_api_is_reexported() -> None:
    for name in ("Scheduler", "RunContext", "Run", "Job", "MemoryBackend", "InvalidJobError", "hookimpl"):
        assert name in anarchon.__all__ and hasattr(anarchon, name)
