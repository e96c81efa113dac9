"""The application version an instance writes to the fleet registry, and the drift policy, checked.

A rolling deploy is told apart by versions: the drift WARNING names each
definition's instances with theirs. ``Scheduler(version=...)`` wins (pass your
own variable: ``version=os.environ["APP_VERSION"]``); else the variable
``ANARCHON_VERSION``; else the installed distribution of the application's
``__main__`` package; else none (``""``).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

from .fleet import DRIFT_POLICIES, DriftPolicy

__all__ = ["VERSION_VARIABLE", "app_version", "check_drift"]

VERSION_VARIABLE = "ANARCHON_VERSION"


def _main_distribution() -> str:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    package = (getattr(spec, "name", None) or "").split(".")[0]
    if not package or package == "__main__":
        return ""
    try:
        for distribution in importlib.metadata.packages_distributions().get(package, []):
            return importlib.metadata.version(distribution)
    except Exception:  # a broken environment's metadata: no version, not a failed start
        return ""
    return ""


def app_version(version: object) -> str:
    if version is None:
        return os.environ.get(VERSION_VARIABLE, "").strip()[:100] or _main_distribution()
    if not isinstance(version, str) or len(version) > 100 or not version.isprintable():
        raise ValueError(
            f"version={version!r} is not allowed: give up to 100 printable characters, such as '1.5.0' or a "
            f"commit; or leave it out for ${VERSION_VARIABLE} or your package's installed version"
        )
    return version


def check_drift(policy: object) -> DriftPolicy:
    if policy not in DRIFT_POLICIES:
        raise ValueError(
            f"drift={policy!r} is not a drift policy: use 'newest' (the default: a new release's definition "
            "runs from its first pod), 'oldest' (the running release's definition runs until its last pod is "
            "gone) or 'each' (every instance runs its own definition, with a warning)"
        )
    return policy  # checked against DRIFT_POLICIES above
