"""What one SQLite file promises (``capabilities.guarantees``, see :mod:`anarchon.guarantees`).

SQLite has no server, so no failover: what can break one run per slot is the
file itself. On tmpfs a reboot empties it (every claim and fencing token is
forgotten); on a network filesystem its locks are not to be trusted, so two
instances can each win one slot; on a nearly full disk every claim fails.
Read from ``/proc/self/mountinfo`` (Linux; elsewhere the filesystem is not
judged) and the disk's free space: no query, nothing written.
"""

from __future__ import annotations

import asyncio
import os
import shutil

from anarchon.backend import Finding

__all__ = ["GuaranteesMixin", "file_findings"]

#: Filesystems a reboot empties.
VOLATILE = frozenset({"tmpfs", "ramfs"})
#: Filesystems whose POSIX locks SQLite's documentation warns about.
NETWORKED = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "fuse.sshfs", "afs", "ceph", "glusterfs"})
#: Below this free space a busy fleet fills the disk within minutes (history rows, the WAL).
LOW_SPACE_BYTES = 100 * 1024 * 1024


def _filesystem(path: str) -> str | None:
    """The type of the filesystem that holds ``path`` (the longest mount point above it), Linux only."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        point = fields[4].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind


def file_findings(path: str, synchronous: str) -> list[Finding]:
    """The findings for a database file at ``path`` (it need not exist yet: its folder is judged)."""
    folder = os.path.dirname(path) or "."
    real = os.path.realpath(path if os.path.exists(path) else folder)
    out = [
        Finding(
            "scope",
            True,
            f"one file ({path}): instances on this host share it; a fleet on several hosts needs a server backend",
        )
    ]
    kind = _filesystem(real)
    if kind in VOLATILE:
        out.append(
            Finding(
                "storage",
                False,
                f"the file is on {kind}: a reboot empties it, so every claim is forgotten, slots run again "
                "and fencing tokens start again from 1",
                "put the database file on a disk (a path outside /dev/shm, /run and any tmpfs)",
            )
        )
    elif kind in NETWORKED:
        out.append(
            Finding(
                "storage",
                False,
                f"the file is on {kind}, a network filesystem whose locks SQLite cannot rely on: "
                "two instances can each win one slot",
                "put the file on a local disk, or use PostgreSQL or Redis for instances on several hosts",
            )
        )
    elif kind is not None:
        out.append(Finding("storage", True, f"the file is on {kind}, a local filesystem: it survives a reboot"))
    if synchronous == "full":
        out.append(Finding("durability", True, "synchronous=full: every commit survives a power cut or an OS crash"))
    else:
        out.append(
            Finding(
                "durability",
                True,
                "synchronous=normal: a commit survives a killed process; a power cut or OS crash can lose the "
                "last commits, but it stops this host's whole fleet with them (synchronous=full keeps those too)",
            )
        )
    free = shutil.disk_usage(real).free
    if free < LOW_SPACE_BYTES:
        out.append(
            Finding(
                "space",
                False,
                f"{free // (1024 * 1024)} MB free where the file lives: on a full disk every claim fails "
                "and no slot runs",
                "free space on that filesystem or move the file; history_size bounds what each job keeps",
            )
        )
    return out


class GuaranteesMixin:
    """``guarantees()`` for :class:`~anarchon_sqlite.SQLiteBackend`."""

    path: str
    synchronous: str

    async def guarantees(self) -> list[Finding]:
        return await asyncio.to_thread(file_findings, self.path, self.synchronous)
