"""What the figures were measured on: cores, CPU model, load, Python and package versions."""

from __future__ import annotations

import os
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

__all__ = ["machine"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, str]:
    load = os.getloadavg()
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cores (nproc)": str(os.cpu_count()),
        "CPU": _cpu_model(),
        "load average at start (1/5/15 min)": " / ".join(f"{x:.2f}" for x in load),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0],
        "anarchon-core": _version("anarchon-core"),
        "croniter": _version("croniter"),
        "pluggy": _version("pluggy"),
    }
