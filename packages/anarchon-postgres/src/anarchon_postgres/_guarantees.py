"""What a PostgreSQL server promises (``capabilities.guarantees``, see :mod:`anarchon.guarantees`).

A claim is one committed ``INSERT``. It is only as safe as the commit:

* on a **standby** (``pg_is_in_recovery()``) every claim fails: the URL must
  name the primary;
* with ``fsync``/``full_page_writes`` off a server crash can lose or corrupt
  what was committed, and with ``synchronous_commit = off`` it loses the
  last commits it acknowledged: those slots are then claimed again;
* with ``synchronous_standby_names`` empty (the default) a standby receives a
  claim after its commit returned: a standby promoted after the primary
  crashed can lack it and grant that slot to a second instance (the failover
  suite measured this, see the README's "When the server fails over"),
  unless each grant waits for a standby to flush it (``min_replicas``, by
  default ``"auto"``: :mod:`._standbys`), which needs a role that can read
  the standbys' positions.

One query of the server's own catalog and settings (``sql/guarantees.sql``),
no schema in it, so it runs on a backend opened read-only too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anarchon.backend import Finding

from ._schema import _resource

__all__ = ["GuaranteesMixin", "findings"]

#: Reads only the server's own catalog: no schema to render into it, so the
#: resource file is sent as it is (it has no placeholder; a test checks).
_QUERY_FILE = "guarantees.sql"
_WAITS = ("on", "remote_write", "remote_apply")
_FAILOVER = "see 'When the server fails over' in the anarchon-postgres README"


def findings(row: Any, min_replicas: int | None = None) -> list[Finding]:
    """The findings for one row of ``sql/guarantees.sql``; ``min_replicas`` as the backend has it (None: auto)."""
    out: list[Finding] = []
    if row["recovering"]:
        out.append(
            Finding(
                "role",
                False,
                "this server is a standby (in recovery, read-only): every claim fails",
                "point the URL at the primary, or at an address that follows the primary across a failover",
            )
        )
    else:
        out.append(Finding("role", True, "this server is a primary: it accepts claims"))
    off = [name for name in ("fsync", "full_page_writes") if row[name] == "off"]
    if off:
        out.append(
            Finding(
                "durability",
                False,
                f"{' and '.join(off)} off: a server crash can lose or corrupt claims it committed, "
                "and those slots can run twice",
                f"set {' and '.join(f'{name} = on' for name in off)} in postgresql.conf",
            )
        )
    else:
        out.append(
            Finding("durability", True, "fsync and full_page_writes on: a commit survives a crash of the server")
        )
    if row["commit"] == "off":
        out.append(
            Finding(
                "commit",
                False,
                "synchronous_commit = off: a server crash loses the claims of its last moments (up to three "
                "times wal_writer_delay), and those slots can run twice",
                "set synchronous_commit = on for the database or the role anarchon connects as",
            )
        )
    else:
        out.append(Finding("commit", True, f"synchronous_commit = {row['commit']}: a claim is durable when it returns"))
    standbys = int(row["standbys"])
    if not standbys:
        out.append(
            Finding(
                "failover",
                True,
                "no standby streams from this server: nothing to fail over to, so a lost server stops the claims "
                "until it is back, and nothing runs twice",
            )
        )
    elif row["sync"] and row["commit"] in _WAITS:
        out.append(
            Finding(
                "failover",
                True,
                f"every claim waits for a synchronous standby ({row['sync']} of {standbys}): a promoted synchronous "
                "standby holds every claim",
            )
        )
    elif int(row["hidden"]):
        out.append(
            Finding(
                "failover",
                False,
                f"{standbys} standby(s) stream from this server, but this role cannot read whether they are "
                "synchronous nor how far they flushed (pg_stat_replication.sync_state, flush_lsn), so grants cannot "
                "wait for them",
                "grant pg_read_all_stats to the role anarchon connects as, or check synchronous_standby_names",
            )
        )
    elif min_replicas != 0 and row["commit"] != "off":
        waits = "auto" if min_replicas is None else str(min_replicas)
        out.append(
            Finding(
                "failover",
                True,
                f"{standbys} standby(s) stream from this server asynchronously, and each grant waits until "
                f"{'one has' if min_replicas in (None, 1) else f'{min_replicas} have'} flushed it "
                f"(min_replicas={waits}): a promoted standby holds every grant that ran; one not confirmed within "
                "replica_timeout_ms is not run (its slot is lost, not run twice)",
            )
        )
    else:  # grants do not wait (min_replicas=0, or commits that are not durable) and no standby is synchronous
        why = (
            "synchronous_standby_names is empty"
            if not row["names"]
            else f"synchronous_commit is {row['commit']!r}"
            if row["commit"] in ("off", "local")
            else "no standby is synchronous yet"
        )
        out.append(
            Finding(
                "failover",
                False,
                f"{standbys} standby(s) stream from this server asynchronously ({why}) and grants do not wait "
                f"for them ({'min_replicas=0' if min_replicas == 0 else 'synchronous_commit is off'}): a standby "
                "promoted after a crash can lack the last claims, and those slots can then run twice",
                "leave min_replicas at 'auto' (each grant waits for a standby to flush it), or name the standby in "
                "synchronous_standby_names and keep synchronous_commit on (or remote_apply); " + _FAILOVER,
            )
        )
    return out


class GuaranteesMixin:
    """``guarantees()`` for :class:`~anarchon_postgres.PostgresBackend`."""

    min_replicas: int | None

    if TYPE_CHECKING:  # the backend's own, used here

        async def _one(self, what: str, sql: str, *args: Any) -> list[Any]: ...

    async def guarantees(self) -> list[Finding]:
        (row,) = await self._one("guarantees", _resource(_QUERY_FILE))
        return findings(row, self.min_replicas)
