"""The SQL each backend method sends: one statement, one round trip each.

Built once per backend from the checked, quoted schema name; everything else
is a query parameter.
"""

from __future__ import annotations

# ruff: noqa: S608 - the only identifier in this SQL is the schema name, checked and quoted first
from dataclasses import dataclass

__all__ = ["Statements"]

_NOW_MS = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

_RUN_COLUMNS = (
    "job, slot_ms, manual, status, instance, attempt, fencing, catch_up, missed, "
    "started_at, finished_at, duration_ms, error"
)


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

    @classmethod
    def for_schema(cls, s: str) -> Statements:
        owned = "job = $1 AND slot_ms = $2 AND manual = $3 AND token = $4"
        finish_set = (
            f"UPDATE {s}.runs SET status = $5, instance = $6, attempt = $7, fencing = $8, catch_up = $9, "
            "missed = $10, started_at = $11, finished_at = $12, duration_ms = $13, error = $14, "
            f"expires_ms = {_NOW_MS} WHERE {owned}"
        )
        # Many finishes in one statement (one commit): each row is one finish's parameters $1-$14.
        many = (
            f"UPDATE {s}.runs r SET status = f.status, instance = f.instance, attempt = f.attempt, "
            "fencing = f.fencing, catch_up = f.catch_up, missed = f.missed, started_at = f.started_at, "
            f"finished_at = f.finished_at, duration_ms = f.duration_ms, error = f.error, expires_ms = {_NOW_MS} "
            "FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::text[], $6::text[], "
            "$7::integer[], $8::bigint[], $9::boolean[], $10::integer[], $11::timestamptz[], $12::timestamptz[], "
            "$13::bigint[], $14::text[]) AS f(job, slot_ms, manual, token, status, instance, attempt, fencing, "
            "catch_up, missed, started_at, finished_at, duration_ms, error) "
            "WHERE r.job = f.job AND r.slot_ms = f.slot_ms AND r.manual = f.manual AND r.token = f.token"
        )
        many_done = " RETURNING r.job, r.slot_ms, r.manual, r.token"
        return cls(
            claim=f"SELECT * FROM {s}.claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            claim_batch=f"SELECT * FROM {s}.claim_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            finish_many=f"{many} AND r.status = 'running'{many_done}",
            finish_many_retry=(
                f"{many} AND (r.status = 'running' OR (r.status = f.status AND r.attempt = f.attempt "
                f"AND r.finished_at IS NOT DISTINCT FROM f.finished_at)){many_done}"
            ),
            # One claim (the usual call) as scalars: asyncpg encodes them far cheaper than arrays.
            claim_one=(
                f"SELECT * FROM {s}.claim(ARRAY[$1::text], ARRAY[$2::bigint], ARRAY[$3::boolean], "
                "ARRAY[$4::text], ARRAY[$5::text], ARRAY[$6::timestamptz], ARRAY[$7::boolean], ARRAY[$8::integer], "
                "ARRAY[$9::bigint], ARRAY[$10::boolean], ARRAY[$11::bigint], ARRAY[$12::bigint])"
            ),
            take_over=f"SELECT * FROM {s}.take_over($1, $2, $3, $4)",
            # From the partial index of running runs: cheap however many jobs there are.
            expired_jobs=f"SELECT DISTINCT job FROM {s}.runs WHERE status = 'running' AND expires_ms <= {_NOW_MS}",
            renew=(
                f"UPDATE {s}.runs r SET expires_ms = {_NOW_MS} + r.lease_ms "
                "FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[]) AS g(job, slot_ms, manual, token) "
                "WHERE r.job = g.job AND r.slot_ms = g.slot_ms AND r.manual = g.manual AND r.token = g.token "
                "AND r.status = 'running' AND NOT r.handed_over RETURNING r.job, r.slot_ms, r.manual, r.token"
            ),
            finish=f"{finish_set} AND status = 'running' RETURNING true",
            # A retry after a lost answer must not turn our own committed finish
            # into a "stale owner" answer: the same record already written counts.
            finish_retry=(
                f"{finish_set} AND (status = 'running' OR (status = $5 AND attempt = $7 "
                "AND finished_at IS NOT DISTINCT FROM $12)) RETURNING true"
            ),
            hand_over=(
                f"UPDATE {s}.runs SET handed_over = true, expires_ms = {_NOW_MS} "
                f"WHERE {owned} AND status = 'running' RETURNING true"
            ),
            history=(f"SELECT {_RUN_COLUMNS} FROM {s}.runs WHERE job = $1 ORDER BY slot_ms DESC, manual DESC LIMIT $2"),
            marks=f"SELECT name, mark FROM {s}.jobs WHERE name = ANY ($1::text[])",
            now_ms=f"SELECT {_NOW_MS}",
        )
