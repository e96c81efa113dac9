"""The fault suite's PostgreSQL: a private cluster, and a primary with a streaming standby.

Found by :mod:`chaos.backends` through this backend's manifest (``[chaos]``);
the bases are :mod:`chaos.brokers` and :mod:`chaos.replicated`.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from chaos.brokers import Broker, BrokerError, free_port
from chaos.replicated import DETECT_S, LAG_S, Replicated, Retarget, _now_ms


def _pg_bin(tool: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"))
    return found[-1] if found else (shutil.which(tool) or tool)


class PostgresBroker(Broker):
    name = "postgres"
    backend_class = "anarchon_postgres:PostgresBackend"
    binaries = ("/usr/lib/postgresql/*/bin/initdb",)
    persistence_note = "fsync on, synchronous_commit on; restart = pg_ctl stop -m immediate (a crash)"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.data = self.workdir / "data"
        self._user = "postgres" if os.geteuid() == 0 else None

    def _as_user(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self._user, "--", *argv] if self._user else argv

    def start(self) -> None:
        if self._user:
            shutil.chown(self.workdir, self._user, self._user)
        if not self.data.exists():
            subprocess.run(
                self._as_user([_pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"]),
                check=True, capture_output=True,
            )  # fmt: skip
        self.port = self.port or free_port()
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.workdir} -c fsync=on "
            "-c synchronous_commit=on -c max_connections=200"
        )
        subprocess.run(
            self._as_user([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.workdir / "pg.log"), "-o", opts,
                           "-w", "-t", "60", "start"]),
            check=True, capture_output=True,
        )  # fmt: skip

    def kill(self) -> None:
        if self.data.exists() and (self.data / "postmaster.pid").exists():
            subprocess.run(
                self._as_user([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
            )

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"dsn": f"postgresql://postgres@127.0.0.1:{port}/postgres", "schema": namespace.replace("-", "_")}


class PostgresPair(Replicated):
    """A primary and a streaming standby (``pg_basebackup -R``), promoted by ``pg_ctl promote``."""

    name = "postgres"
    backend_class = "anarchon_postgres:PostgresBackend"
    binaries = ("/usr/lib/postgresql/*/bin/initdb",)
    persistence_note = "primary + 1 streaming standby; fsync on, synchronous_commit on"
    durable_note = "synchronous_standby_names='*'"

    def __init__(self, workdir: Path, durable: bool) -> None:
        super().__init__(workdir, durable)
        import os

        self._user = "postgres" if os.geteuid() == 0 else None
        self.ports: list[int] = []
        self.primary = 0

    def _data(self, i: int) -> Path:
        return self.workdir / f"data{i}"

    def _run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess[bytes]:
        full = ["runuser", "-u", self._user, "--", *argv] if self._user else argv
        done = subprocess.run(full, capture_output=True, timeout=120)
        if check and done.returncode != 0:
            raise BrokerError(f"{' '.join(argv[:2])} failed: {done.stderr.decode(errors='replace')[-500:]}")
        return done

    def _opts(self, i: int) -> str:
        sync = "-c synchronous_standby_names=* " if self.durable else ""
        return (
            f"-p {self.ports[i]} -c listen_addresses=127.0.0.1 -k {self.workdir} -c fsync=on "
            f"-c synchronous_commit=on -c max_connections=200 -c wal_level=replica {sync}"
            "-c hot_standby=on -c wal_keep_size=256MB"
        )

    def _pg_start(self, i: int) -> None:
        log = self.workdir / f"pg{i}.log"
        self._run([_pg_bin("pg_ctl"), "-D", str(self._data(i)), "-l", str(log), "-o", self._opts(i), "-w", "-t", "60",
                   "start"])  # fmt: skip

    def _standby_of(self, i: int, primary: int) -> None:
        shutil.rmtree(self._data(i), ignore_errors=True)
        self._run([_pg_bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.ports[primary]), "-U", "postgres",
                   "-D", str(self._data(i)), "-R", "-X", "stream", "-c", "fast"])  # fmt: skip
        self._pg_start(i)

    def start(self) -> None:
        if self._user:
            shutil.chown(self.workdir, self._user, self._user)
        self.ports = [free_port(), 0]
        self.ports[1] = free_port(set(self.ports))
        self._run([_pg_bin("initdb"), "-D", str(self._data(0)), "-A", "trust", "-U", "postgres", "--no-sync"])
        with open(self._data(0) / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self._pg_start(0)
        self._standby_of(1, 0)
        self.port = self.ports[0]

    def _stop(self, i: int, mode: str = "immediate") -> None:
        if (self._data(i) / "postmaster.pid").exists():
            self._run([_pg_bin("pg_ctl"), "-D", str(self._data(i)), "-m", mode, "-w", "stop"], check=False)

    def failover(self, kind: str, retarget: Retarget, seats: int) -> tuple[int, int]:
        old, new = self.primary, 1 - self.primary
        start = _now_ms()
        if kind == "crash":
            self._stop(old)
            time.sleep(DETECT_S)
        self._run([_pg_bin("pg_ctl"), "-D", str(self._data(new)), "-w", "-t", "60", "promote"])
        self.primary, self.port = new, self.ports[new]
        half = list(range(seats // 2))
        if kind == "switch":
            retarget(self.port, half)
            time.sleep(LAG_S)
            retarget(self.port, [s for s in range(seats) if s not in half])
            end = _now_ms()
            self._stop(old)
        else:
            retarget(self.port, None)
            end = _now_ms()
        self._standby_of(old, new)  # the old primary's own timeline is thrown away, as pg_rewind would
        return start, end

    def kill(self) -> None:
        for i in range(len(self.ports)):
            self._stop(i)

    def backend_kwargs(self, port: int, namespace: str) -> dict[str, Any]:
        return {"dsn": f"postgresql://postgres@127.0.0.1:{port}/postgres", "schema": namespace.replace("-", "_")}

    def describe(self) -> str:
        return f"postgres primary :{self.ports[0]} + standby :{self.ports[1]}"


#: The scenario's brokers, and the failover scenario's replicated referees.
BROKERS: tuple[type[Broker], ...] = (PostgresBroker,)
FAILOVER: tuple[type[Replicated], ...] = (PostgresPair,)
