"""Whether claims commit on a primary that replicates them asynchronously, read once at ``start()``.

A claim is one committed ``INSERT``. With ``synchronous_standby_names``
empty (the default) a standby receives it after the commit returned: a
standby promoted after the primary crashed can lack it, and grant that slot
to a second instance. ``pg_stat_replication`` shows the standbys streaming
from this server and whether they are synchronous; reading it is one cheap
query. A non-privileged role sees its rows without ``sync_state`` (NULL):
then nothing is said, rather than a guess.
"""

from __future__ import annotations

from typing import Any

from ._schema import _resource

__all__ = ["asynchronous_standbys"]

#: Reads only the server's own catalog: no schema to render into it, so the
#: resource file is sent as it is (it has no placeholder; a test checks).
_QUERY_FILE = "replication_standbys.sql"


async def asynchronous_standbys(conn: Any) -> str | None:
    """A warning when this primary streams claims to a standby asynchronously, else ``None``."""
    row = await conn.fetchrow(_resource(_QUERY_FILE))
    if row is None or not row["async"]:
        return None
    if row["sync"] and row["commit"] in ("on", "remote_write", "remote_apply"):
        return None  # a synchronous standby holds every claim; the others are extra copies
    why = (
        "synchronous_standby_names is empty"
        if not row["names"]
        else f"synchronous_commit is {row['commit']!r}"
        if row["commit"] in ("off", "local")
        else "no standby is synchronous yet"
    )
    return (
        f"this primary streams to {row['async']} standby(s) asynchronously ({why}): a claim committed here "
        "can be missing on a standby promoted after a crash, and that slot can then run twice. To make a "
        "failover keep every claim, name the standby in synchronous_standby_names and keep synchronous_commit "
        "on (or remote_apply); see 'When the server fails over' in the anarchon-postgres README"
    )
