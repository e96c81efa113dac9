"""The plugin manager: backend discovery and observer calls.

Backends and observers arrive through the entry-point group ``anarchon``
(loaded by pluggy) or ``Scheduler(plugins=[...])``. Backend classes are keyed
by their declared ``name`` and URL schemes; first-party backends that are not
installed are still known by name, so the error can say what to install.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

import pluggy

from . import hookspecs
from .backend import Backend
from .distributions import DEFAULT_BACKEND, DEFAULT_BACKEND_DISTRIBUTION, SCHEME_DISTRIBUTIONS, install_hint
from .errors import BackendNotInstalledError
from .urls import redact_url, url_scheme

__all__ = ["PluginManager"]

log = logging.getLogger("anarchon.plugins")

DISABLE_ENV = "ANARCHON_DISABLE_PLUGINS"
BACKEND_ENV = "ANARCHON_BACKEND"


@functools.cache
def _entry_point_plugins() -> dict[str, tuple[object | None, str]]:
    """Load the group once per process: every Scheduler shares the modules."""
    loaded: dict[str, tuple[object | None, str]] = {}
    for ep in importlib.metadata.entry_points(group=hookspecs.PROJECT):
        try:
            loaded[ep.name] = (ep.load(), "")
        except Exception as exc:
            loaded[ep.name] = (None, f"{type(exc).__name__}: {exc}")
            log.warning("anarchon plugin %r (%s) failed to load and is ignored: %s", ep.name, ep.value, exc)
    return loaded


class PluginManager:
    """pluggy's manager with anarchon's hooks, entry points and backend registry."""

    def __init__(self, plugins: Iterable[object] = (), *, entry_points: bool = True) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        for name in filter(None, (n.strip() for n in os.environ.get(DISABLE_ENV, "").split(","))):
            self._pm.set_blocked(name)
        #: Entry points that failed to load, by name, with the error: shown by
        #: ``anarchon backends`` instead of breaking every scheduler.
        self.broken: dict[str, str] = {}
        if entry_points:
            self._load_entry_points()
        else:
            from . import _memory_plugin

            self._pm.register(_memory_plugin, name="memory")
        for plugin in plugins:
            self.register(plugin)
        self._backends: dict[str, type[Backend]] | None = None
        #: Hook callers by spec function: notify() runs several times per run.
        self._callers: dict[Callable[..., None], Any] = {}

    def _load_entry_points(self) -> None:
        for name, (plugin, error) in _entry_point_plugins().items():
            if self._pm.is_blocked(name) or self._pm.get_plugin(name) is not None:
                continue
            if plugin is None:
                self.broken[name] = error
                continue
            self._pm.register(plugin, name=name)
            refused = self._async_observers(plugin)
            if refused:
                self._pm.unregister(plugin)
                self.broken[name] = refused
                log.warning("anarchon plugin %r is ignored: %s", name, refused)
        self._pm.check_pending()

    def register(self, plugin: object) -> None:
        """Add a plugin; an ``async def`` observer is refused with :class:`TypeError`."""
        self._pm.register(plugin)
        refused = self._async_observers(plugin)
        if refused:
            self._pm.unregister(plugin)
            raise TypeError(refused)
        self._pm.check_pending()
        self._backends = None

    def _async_observers(self, plugin: object) -> str:
        """Why this plugin is refused (its ``async def`` observers), or ``""``.

        Observers are called synchronously on the scheduler's loop; a
        coroutine function would be called, never awaited, and do nothing.
        """
        names = [
            impl.function.__qualname__
            for caller in self._pm.get_hookcallers(plugin) or []
            for impl in caller.get_hookimpls()
            if impl.plugin is plugin and inspect.iscoroutinefunction(impl.function)
        ]
        if not names:
            return ""
        return (
            f"observer(s) {', '.join(names)} are async def; observers are called synchronously on the "
            "scheduler's event loop and would never be awaited: make them plain functions (to do I/O, "
            "start a task with asyncio.get_running_loop().create_task(...) or hand off to a queue)"
        )

    @property
    def pluggy(self) -> pluggy.PluginManager:
        return self._pm

    # -- backends ------------------------------------------------------------

    def backends(self) -> dict[str, type[Backend]]:
        """Installed backend classes by name; two plugins claiming one name is an error."""
        if self._backends is None:
            found: dict[str, type[Backend]] = {}
            for classes in self._pm.hook.anarchon_register_backends():
                for cls in classes:
                    other = found.get(cls.name)
                    if other is not None and other is not cls:
                        raise RuntimeError(
                            f"two plugins register a backend named {cls.name!r}: "
                            f"{other.__module__}.{other.__qualname__} and {cls.__module__}.{cls.__qualname__}; "
                            f"uninstall one, or block it with {DISABLE_ENV}=<plugin name>"
                        )
                    found[cls.name] = cls
            self._backends = found
        return self._backends

    def schemes(self) -> dict[str, type[Backend]]:
        return {scheme: cls for cls in self.backends().values() for scheme in cls.url_schemes}

    def resolve(self, backend: Backend | str | None) -> Backend:
        """A backend object for what ``Scheduler(backend=...)`` was given.

        ``None`` reads ``ANARCHON_BACKEND``, else the embedded default.
        """
        if isinstance(backend, Backend):
            return backend
        if backend is None:
            backend = os.environ.get(BACKEND_ENV)
            if not backend:
                if url_scheme(DEFAULT_BACKEND) not in self.schemes():
                    raise BackendNotInstalledError(
                        "no backend given: pass Scheduler(backend=...) or set "
                        f"{BACKEND_ENV}; for the embedded default, {install_hint(DEFAULT_BACKEND_DISTRIBUTION)}"
                    )
                backend = DEFAULT_BACKEND
        if isinstance(backend, str):
            return self.backend_from_url(backend)
        raise TypeError(f"backend must be a Backend, a URL string or None, not {type(backend).__name__}")

    def backend_from_url(self, url: str) -> Backend:
        scheme = url_scheme(url)
        cls = self.schemes().get(scheme)
        if cls is None:
            installed = ", ".join(sorted(self.schemes())) or "none"
            wanted = SCHEME_DISTRIBUTIONS.get(scheme)
            hint = (
                f"; {install_hint(wanted)} provides it"
                if wanted
                else "; no known distribution provides it, check the URL"
            )
            raise BackendNotInstalledError(
                f"no installed backend handles {redact_url(url)!r} (scheme {scheme!r}); "
                f"installed schemes: {installed}{hint}"
            )
        return cls.from_url(url)

    # -- observers -----------------------------------------------------------

    def notify(self, hook: Callable[..., None], **kwargs: Any) -> None:
        """Call every implementation of an observer hook, each on its own.

        ``hook`` is the specification function itself (from
        :mod:`anarchon.hookspecs`); :class:`anarchon.observers.Observers` wraps
        each in a typed method. An observer that raises is logged and skipped;
        the others still run and scheduling never sees the exception.
        """
        caller = self._callers.get(hook)
        if caller is None:
            caller = self._callers[hook] = getattr(self._pm.hook, hook.__name__)
        for impl in caller.get_hookimpls():
            try:
                impl.function(*[kwargs[arg] for arg in impl.argnames])
            except Exception:
                log.exception("observer %s.%s failed; scheduling goes on", impl.plugin_name, hook.__name__)
