"""FolderBackend: a claim-tier backend whose referee is the filesystem's exclusive create.

Copy this package to start a backend of your own; every name it imports
from anarchon is public (``anarchon.backend``, ``anarchon.errors``,
``anarchon.job``, ``anarchon.run``), and ``docs/protocol.md`` states the
contract it keeps.

The store is one folder. Each job has a folder of its own, holding:

``gate-<slot_ms>-<s|m>``
    Created with ``O_CREAT | O_EXCL``: of all the instances that try, the
    filesystem lets exactly one create it, and that one runs the slot. It
    holds the winner's claim token, so a retried claim gets its first answer.
    Gates are the memory of who won; they are removed only when their slot
    is older than ``remember_ms``, and :meth:`FolderBackend.check_job` refuses
    a job that an instance could still claim that late.
``run-<slot_ms>-<s|m>.json``
    The run's history record, replaced atomically (write, then rename) when
    the run finishes; the oldest beyond ``history_size`` are removed.

Nothing here holds a lease, so the backend is claim tier: a winner that dies
loses its run, which the conformance suite checks for claim backends.
Exclusive create is atomic on a local filesystem; it is not on every network
filesystem, which is why this is a template and not a product.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, urlsplit

from anarchon.backend import Backend, Capabilities, Claim, ClaimResult, Grant, Outcome, decode_run, read_runs
from anarchon.errors import BackendUnavailableError, InvalidJobError
from anarchon.job import Job
from anarchon.run import Run, RunStatus

__all__ = ["FolderBackend"]

#: A day: how long a slot's gate is kept after the slot's time.
REMEMBER_MS = 86_400_000


def _key(slot_ms: int, manual: bool) -> str:
    return f"{slot_ms}-{'m' if manual else 's'}"


class FolderBackend(Backend):
    """Claims as exclusively created files in ``root`` (``folder:///srv/cron``)."""

    name: ClassVar[str] = "folder"
    url_schemes: ClassVar[tuple[str, ...]] = ("folder",)
    capabilities: ClassVar[Capabilities] = Capabilities(lease=False, idempotent_claim=True, multi_process=True)

    def __init__(self, root: str | os.PathLike[str], *, remember_ms: int = REMEMBER_MS) -> None:
        if isinstance(remember_ms, bool) or not isinstance(remember_ms, int) or remember_ms < 60_000:
            raise ValueError(
                f"remember_ms={remember_ms!r} must be an integer of at least 60000 (a minute); "
                f"leave it out for the default {REMEMBER_MS}"
            )
        self.root = Path(root)
        self.remember_ms = remember_ms

    @classmethod
    def from_url(cls, url: str) -> FolderBackend:
        parts = urlsplit(url)
        if parts.scheme != "folder" or parts.netloc or not parts.path:
            raise ValueError(f"backend URL {url!r} must be folder:///absolute/path (three slashes, no host)")
        return cls(parts.path)

    def __repr__(self) -> str:
        return f"FolderBackend({str(self.root)!r})"

    async def start(self) -> None:
        try:
            await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendUnavailableError(
                f"cannot create the store folder {self.root}: {exc}; give the process write access or another path"
            ) from None

    async def close(self) -> None:
        """Nothing is held open between calls."""

    def check_job(self, job: Job) -> None:
        late = job.options.jitter_ms + job.options.max_late_ms
        if late >= self.remember_ms:
            raise InvalidJobError(
                f"job {job.name!r} on backend 'folder': jitter_ms + max_late_ms = {late} ms must be shorter than "
                f"remember_ms={self.remember_ms}, or an instance that late could win a slot whose gate was "
                "removed; lower max_late_ms or raise FolderBackend(remember_ms=...)",
                option="max_late_ms",
                value=job.options.max_late_ms,
            )

    def _folder(self, job: str) -> Path:
        # quote() leaves only letters, digits and "_.-~": no separator, and the prefix rules out "." and "..".
        return self.root / f"job-{quote(job, safe='')}"

    # -- claiming ------------------------------------------------------------

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        return await asyncio.to_thread(lambda: [self._claim(c) for c in claims])

    def _claim(self, c: Claim) -> ClaimResult:
        folder = self._folder(c.job)
        folder.mkdir(parents=True, exist_ok=True)
        gate = folder / f"gate-{_key(c.slot_ms, c.manual)}"
        try:
            fd = os.open(gate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return self._retried(c, gate)
        with os.fdopen(fd, "w") as f:
            f.write(c.token)
        self._write(folder, c.slot_ms, c.manual, c.running(), c.token)
        self._trim(folder, c.options.history_size, c.now_ms)
        return ClaimResult(Outcome.WON, c.granted())

    def _retried(self, c: Claim, gate: Path) -> ClaimResult:
        """A claim of a decided slot: the first answer again for its own token while the run runs."""
        if gate.read_text() != c.token:
            return ClaimResult(Outcome.LOST)
        stored = self._read(self._folder(c.job) / f"run-{_key(c.slot_ms, c.manual)}.json")
        if stored is None or stored[1] != c.token or stored[0].status is not RunStatus.RUNNING:
            return ClaimResult(Outcome.LOST)
        return ClaimResult(Outcome.WON, c.granted())

    async def finish(self, grant: Grant, run: Run) -> bool:
        def write() -> bool:
            folder = self._folder(grant.job)
            stored = self._read(folder / f"run-{_key(grant.slot_ms, grant.manual)}.json")
            if stored is None or stored[1] != grant.token or stored[0].status is not RunStatus.RUNNING:
                return False
            self._write(folder, grant.slot_ms, grant.manual, run, grant.token)
            return True

        return await asyncio.to_thread(write)

    # -- records ---------------------------------------------------------------

    def _write(self, folder: Path, slot_ms: int, manual: bool, run: Run, token: str) -> None:
        final = folder / f"run-{_key(slot_ms, manual)}.json"
        spare = folder / f".run-{_key(slot_ms, manual)}.{os.getpid()}.tmp"
        spare.write_text(json.dumps({**run.to_dict(), "token": token}))
        os.replace(spare, final)  # atomic: a reader sees the old record or the new one, never half

    def _read(self, path: Path) -> tuple[Run, str] | None:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        run = decode_run(raw, job=str(raw.get("job", "?"))) if isinstance(raw, dict) else None
        return None if run is None else (run, str(raw.get("token")))

    def _records(self, folder: Path) -> list[Path]:
        """The job's record files, newest slot first."""

        def slot(path: Path) -> int:
            try:
                return int(path.name.split("-")[1])
            except (IndexError, ValueError):
                return -1  # a file this version did not write sorts last and is read as foreign

        return sorted(folder.glob("run-*.json"), key=slot, reverse=True)

    def _trim(self, folder: Path, history_size: int, now_ms: int) -> None:
        for old in self._records(folder)[history_size:]:
            old.unlink(missing_ok=True)
        for gate in folder.glob("gate-*"):
            try:
                if int(gate.name.split("-")[1]) < now_ms - self.remember_ms:
                    gate.unlink(missing_ok=True)
            except (IndexError, ValueError):
                continue

    async def history(self, job: str, limit: int = 100) -> list[Run]:
        folder = self._folder(job)

        async def fetch(n: int) -> list[bytes]:
            def load() -> list[bytes]:
                found = []
                for path in self._records(folder)[:n]:
                    try:
                        found.append(path.read_bytes())
                    except FileNotFoundError:
                        continue  # trimmed since it was listed
                return found

            return await asyncio.to_thread(load)

        return await read_runs(fetch, lambda raw: decode_run(raw, job=job), limit)
