"""The SQL each backend method sends: one statement, one round trip each.

Each statement is the resource file ``sql/statement_<field>.sql`` (what it
includes: ``statement_part_*.sql``), rendered once per backend for the
checked, quoted schema name by :func:`._schema.render_sql`; everything else
is a query parameter. The backfill's statements (:mod:`._backfill`) and the
pauses' and run requests' (:mod:`._control`) follow the same rule, as
``sql/statement_backfill_<field>.sql`` and ``sql/statement_control_<field>.sql``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ._schema import render_sql

__all__ = ["EARLIER_SINCE", "Statements"]

#: The schema version whose runs keep their earlier attempts (migration_12.sql).
EARLIER_SINCE = 12


@dataclass(frozen=True)
class Statements:
    claim: str
    claim_one: str
    claim_batch: str
    finish_many: str
    finish_many_retry: str
    take_over: str
    expired_jobs: str
    renew: str
    finish: str
    finish_retry: str
    hand_over: str
    history: str
    #: history's, for a look (start_read_only) at a schema older than EARLIER_SINCE.
    history_without_earlier: str
    marks: str
    now_ms: str
    #: LeaseBackend.revive's, one per slot (anarchon_postgres._revive).
    revive: str
    #: The heartbeat's (anarchon.liveness), sent by the Heart on its own connection.
    beat: str
    leave: str

    @classmethod
    def for_schema(cls, quoted_schema: str) -> Statements:
        """Every statement for one schema, quoted by :func:`._schema.quote_schema`."""
        return cls(**{f.name: render_sql(f"statement_{f.name}.sql", quoted_schema).strip() for f in fields(cls)})

    def history_for(self, read_only: bool, version: int | None) -> str:
        """history's statement for a schema at ``version``: a look at an older one reads no ``earlier``.

        :meth:`~anarchon_postgres.PostgresBackend.start` brings the schema to the current
        version, so only a read-only start may find one without the column.
        """
        return self.history_without_earlier if read_only and (version or 0) < EARLIER_SINCE else self.history
