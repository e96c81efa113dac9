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

__all__ = ["Statements"]


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
