"""CPU and resident set of processes, read from ``/proc`` (Linux), for the long-running modes.

A process that has exited counts as nothing from then on; a reading is a
snapshot, so the CPU of a window is the difference of two readings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["cpu_seconds", "oncpu_seconds", "pids_named", "rss_mb"]

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _read(pids: Iterable[int], name: str) -> Iterator[str]:
    """The text of ``/proc/<pid>/<name>`` for each of ``pids`` still there (an exited one is skipped)."""
    for pid in pids:
        try:
            yield Path(f"/proc/{pid}/{name}").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (fields 14 and 15 of ``/proc/<pid>/stat``)."""
    total = 0.0
    for text in _read(pids, "stat"):
        fields = text.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def oncpu_seconds(pids: Iterable[int]) -> float:
    """Seconds ``pids`` spent on a CPU so far (``/proc/<pid>/schedstat``, in nanoseconds).

    For windows where ``stat``'s clock ticks (10 ms) are too coarse: a server
    process that answers a few statements a second uses well under a tick each.
    """
    return sum(int(text.split()[0]) for text in _read(pids, "schedstat")) / 1e9


def rss_mb(pids: Iterable[int]) -> float:
    """Resident set of ``pids`` together, in MB (shared pages counted once per process)."""
    return sum(int(text.split()[1]) for text in _read(pids, "statm")) * _PAGE / 1024 / 1024


def pids_named(name: str, needle: str = "") -> list[int]:
    """Processes named ``name`` whose command line holds ``needle`` (the shared server, not private ones)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != name:
                continue
            if needle in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
        except (FileNotFoundError, PermissionError):
            continue
    return found
