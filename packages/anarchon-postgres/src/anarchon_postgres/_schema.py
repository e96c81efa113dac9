"""The tables and functions the backend keeps in its schema, and their migrations.

Every lease rule runs inside PL/pgSQL functions created here, so each claim,
take-over, renewal and finish is one statement and one round trip. The schema
name is the only identifier ever put into SQL text; it is checked and quoted
first, and every value travels as a query parameter.
"""

from __future__ import annotations

# ruff: noqa: S608 - the only identifier in this SQL is the schema name, checked and quoted first
import logging
import re

import asyncpg  # type: ignore[import-untyped]

__all__ = [
    "SCHEMA_VERSION",
    "check_schema_name",
    "ensure_schema",
    "installed_version",
    "migration_script",
    "migration_steps",
    "quote_schema",
]

log = logging.getLogger("anarchon.postgres")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

#: Advisory-lock class shared by every anarchon schema ("anar" in ASCII); the
#: second key is ``hashtext(schema)``, so instances on different schemas do
#: not wait for each other.
_LOCK_CLASS = 0x616E6172


def check_schema_name(schema: object) -> str:
    if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
        raise ValueError(
            f"schema={schema!r} is not a plain PostgreSQL identifier: use 1 to 63 letters, digits or '_', "
            "not starting with a digit, for example schema='anarchon'"
        )
    if schema.lower().startswith("pg_") or schema.lower() == "information_schema":
        raise ValueError(
            f"schema={schema!r} is a PostgreSQL system schema (pg_catalog, pg_toast, pg_*, information_schema): "
            "anarchon's tables must not live there; pick another, for example schema='anarchon'"
        )
    return schema


def quote_schema(schema: str) -> str:
    return f'"{check_schema_name(schema)}"'


def _now_ms() -> str:
    return "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _claim_function(s: str) -> str:
    """The claim function, as migration 1 creates it and migration 2 brings it up to date."""
    now = _now_ms()
    return f"""
-- Decide many claims in one call; the lease rules of anarchon.backend, as
-- MemoryStore.claim applies them, under a row lock on each job. A new slot
-- costs two statements: lock the job row and read the mark (which a won
-- claim reports back as o_previous_mark), then decide and record (a lone
-- claim with overlap "allow" decides in the second, and then abandons
-- expired older runs).
CREATE FUNCTION {s}.claim(
    p_job text[], p_slot bigint[], p_manual boolean[], p_token text[], p_instance text[],
    p_started timestamptz[], p_catch_up boolean[], p_missed integer[], p_lease bigint[],
    p_skip boolean[], p_size bigint[], p_ttl bigint[]
) RETURNS TABLE (
    o_n integer, o_outcome text, o_instance text, o_attempt integer, o_fencing bigint,
    o_catch_up boolean, o_missed integer, o_started_at timestamptz, o_finished_at timestamptz,
    o_duration_ms bigint, o_lease_ms bigint, o_supersedes bigint, o_previous_mark bigint
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_n integer := coalesce(array_length(p_job, 1), 0);
    v_locked bigint;
    r {s}.runs%ROWTYPE;
    v_now bigint;
    v_mark bigint;
    v_busy boolean;
    v_fencing bigint;
    v_count bigint;
    v_gone bigint;
BEGIN
    -- A lone scheduled claim with no overlap test wins exactly when its slot
    -- is above the mark, so once the mark is read under the row lock, one
    -- conditional update of its job row decides and records it. A new job,
    -- a slot at or below the mark (a retry among them) and every other claim
    -- take the general path further down.
    IF v_n = 1 AND NOT p_manual[1] AND NOT p_skip[1] THEN
        SELECT mark INTO v_mark FROM {s}.jobs WHERE name = p_job[1] FOR UPDATE;
        WITH j AS (
            UPDATE {s}.jobs
                SET mark = p_slot[1], won = p_slot[1], fencing = fencing + 1, run_count = run_count + 1
                WHERE name = p_job[1] AND (mark IS NULL OR mark < p_slot[1]) RETURNING fencing, run_count
        ), ins AS (
            INSERT INTO {s}.runs SELECT
                p_job[1], p_slot[1], false, 'running', p_instance[1], 1, j.fencing, p_catch_up[1],
                p_missed[1], p_started[1], NULL, NULL, NULL, p_token[1], p_lease[1], {now} + p_lease[1], false
            FROM j
        )
        SELECT fencing, run_count INTO v_fencing, v_count FROM j;
        IF FOUND THEN
            v_now := {now};
            WITH gone AS (
                UPDATE {s}.runs SET status = 'abandoned'
                    WHERE job = p_job[1] AND status = 'running' AND NOT manual
                      AND slot_ms < p_slot[1] AND expires_ms <= v_now
                    RETURNING slot_ms
            )
            SELECT max(slot_ms) INTO v_gone FROM gone;
            -- The update above replaced `won`; the dead run was it when no slot since ran.
            o_supersedes := NULL;
            IF v_gone IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM {s}.runs WHERE job = p_job[1] AND NOT manual AND status <> 'skipped'
                    AND slot_ms > v_gone AND slot_ms < p_slot[1]
            ) THEN
                o_supersedes := v_gone;
            END IF;
            IF v_count > p_size[1] + p_size[1] / 16 OR p_ttl[1] IS NOT NULL THEN
                PERFORM {s}.trim_history(p_job[1], v_count, p_size[1], p_ttl[1], v_now);
            END IF;
            o_n := 1; o_outcome := 'won'; o_instance := p_instance[1]; o_attempt := 1; o_fencing := v_fencing;
            o_catch_up := p_catch_up[1]; o_missed := p_missed[1]; o_started_at := p_started[1];
            o_finished_at := NULL; o_duration_ms := NULL; o_lease_ms := p_lease[1]; o_previous_mark := v_mark;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;

    -- Job rows are locked in name order, and missing ones created in name
    -- order, so concurrent multi-job claims queue up instead of deadlocking.
    IF v_n = 1 THEN
        SELECT mark INTO v_mark FROM {s}.jobs WHERE name = p_job[1] FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO {s}.jobs (name) VALUES (p_job[1]) ON CONFLICT (name) DO NOTHING;
            SELECT mark INTO v_mark FROM {s}.jobs WHERE name = p_job[1] FOR UPDATE;
        END IF;
    ELSIF v_n > 1 THEN
        PERFORM 1 FROM {s}.jobs WHERE name = ANY (p_job) ORDER BY name FOR UPDATE;
        GET DIAGNOSTICS v_locked = ROW_COUNT;
        IF v_locked < v_n THEN  -- some job is new (or named twice)
            INSERT INTO {s}.jobs (name)
                SELECT DISTINCT j FROM unnest(p_job) AS j ORDER BY 1
                ON CONFLICT (name) DO NOTHING;
            PERFORM 1 FROM {s}.jobs WHERE name = ANY (p_job) ORDER BY name FOR UPDATE;
        END IF;
    END IF;
    v_now := {now};

    FOR i IN 1 .. v_n LOOP
        o_n := i;
        o_outcome := 'lost';
        o_supersedes := NULL;
        o_previous_mark := NULL;
        IF v_n > 1 AND NOT p_manual[i] THEN
            SELECT mark INTO v_mark FROM {s}.jobs WHERE name = p_job[i];
        END IF;
        -- A scheduled slot above the mark was never decided, so it has no
        -- record to look up; any other slot may be a retry (same token),
        -- which gets its first answer back.
        IF p_manual[i] OR p_slot[i] <= v_mark THEN
            SELECT * INTO r FROM {s}.runs WHERE job = p_job[i] AND slot_ms = p_slot[i] AND manual = p_manual[i];
            IF FOUND OR NOT p_manual[i] THEN
                IF FOUND AND r.token = p_token[i] AND r.status IN ('skipped', 'running') THEN
                    o_outcome := CASE r.status WHEN 'running' THEN 'won' ELSE 'skipped' END;
                    o_instance := r.instance; o_attempt := r.attempt; o_fencing := r.fencing;
                    o_catch_up := r.catch_up; o_missed := r.missed; o_started_at := r.started_at;
                    o_finished_at := r.finished_at; o_duration_ms := r.duration_ms; o_lease_ms := r.lease_ms;
                ELSIF NOT FOUND AND p_skip[i] AND EXISTS (
                    SELECT 1 FROM {s}.runs WHERE job = p_job[i] AND status = 'running'
                        AND expires_ms > v_now AND slot_ms < p_slot[i]
                ) THEN
                    -- Delayed past a newer slot's claim: too late to run, but overlapped by an older
                    -- run all along, so recorded skipped as it would have been in time (the mark stays).
                    INSERT INTO {s}.runs VALUES (
                        p_job[i], p_slot[i], false, 'skipped', p_instance[i], 1, NULL, p_catch_up[i], p_missed[i],
                        p_started[i], p_started[i], 0, NULL, p_token[i], p_lease[i], v_now, false
                    );
                    UPDATE {s}.jobs SET run_count = run_count + 1 WHERE name = p_job[i]
                        RETURNING run_count INTO v_count;
                    o_outcome := 'skipped'; o_instance := p_instance[i]; o_attempt := 1; o_fencing := NULL;
                    o_catch_up := p_catch_up[i]; o_missed := p_missed[i]; o_started_at := p_started[i];
                    o_finished_at := p_started[i]; o_duration_ms := 0; o_lease_ms := p_lease[i];
                    IF v_count > p_size[i] + p_size[i] / 16 OR p_ttl[i] IS NOT NULL THEN
                        PERFORM {s}.trim_history(p_job[i], v_count, p_size[i], p_ttl[i], v_now);
                    END IF;
                ELSE
                    o_instance := NULL; o_attempt := NULL; o_fencing := NULL; o_catch_up := NULL;
                    o_missed := NULL; o_started_at := NULL; o_finished_at := NULL;
                    o_duration_ms := NULL; o_lease_ms := NULL;
                END IF;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        -- One statement decides and records, under the lock taken above:
        -- older scheduled runs whose lease expired are abandoned, and with
        -- overlap "skip" a live run makes the claim skipped. The abandon and
        -- the overlap test touch disjoint rows, so one snapshot serves both;
        -- `busy` is materialized so its test runs once, not once per use.
        WITH gone AS (
            UPDATE {s}.runs SET status = 'abandoned'
                WHERE NOT p_manual[i] AND job = p_job[i] AND status = 'running' AND NOT manual
                  AND slot_ms < p_slot[i] AND expires_ms <= v_now
                RETURNING slot_ms
        ), prev AS (
            SELECT won FROM {s}.jobs WHERE name = p_job[i]  -- the statement's snapshot: before `j`
        ), busy AS MATERIALIZED (
            SELECT p_skip[i] AND EXISTS (
                SELECT 1 FROM {s}.runs WHERE job = p_job[i] AND status = 'running' AND expires_ms > v_now
            ) AS skipped
        ), j AS (
            UPDATE {s}.jobs
                SET mark = CASE WHEN p_manual[i] THEN mark ELSE p_slot[i] END,
                    won = CASE WHEN p_manual[i] OR busy.skipped THEN won ELSE p_slot[i] END,
                    fencing = CASE WHEN busy.skipped THEN fencing ELSE fencing + 1 END,
                    run_count = run_count + 1
                FROM busy
                WHERE name = p_job[i]
                RETURNING busy.skipped, CASE WHEN busy.skipped THEN NULL ELSE fencing END AS fencing, run_count
        ), ins AS (
            INSERT INTO {s}.runs SELECT
                p_job[i], p_slot[i], p_manual[i], CASE WHEN j.skipped THEN 'skipped' ELSE 'running' END,
                p_instance[i], 1, j.fencing, p_catch_up[i], p_missed[i], p_started[i],
                CASE WHEN j.skipped THEN p_started[i] END, CASE WHEN j.skipped THEN 0::bigint END, NULL,
                p_token[i], p_lease[i], CASE WHEN j.skipped THEN v_now ELSE v_now + p_lease[i] END, false
            FROM j
        )
        SELECT j.skipped, j.fencing, j.run_count,
               (SELECT max(g.slot_ms) FROM gone g JOIN prev ON g.slot_ms = prev.won)
            INTO v_busy, v_fencing, v_count, v_gone FROM j;
        o_instance := p_instance[i]; o_attempt := 1; o_fencing := v_fencing; o_catch_up := p_catch_up[i];
        o_missed := p_missed[i]; o_started_at := p_started[i]; o_lease_ms := p_lease[i];
        IF v_busy THEN
            o_outcome := 'skipped'; o_finished_at := p_started[i]; o_duration_ms := 0;
        ELSE
            o_outcome := 'won'; o_finished_at := NULL; o_duration_ms := NULL; o_supersedes := v_gone;
            o_previous_mark := CASE WHEN p_manual[i] THEN NULL ELSE v_mark END;
        END IF;
        IF v_count > p_size[i] + p_size[i] / 16 OR p_ttl[i] IS NOT NULL THEN
            PERFORM {s}.trim_history(p_job[i], v_count, p_size[i], p_ttl[i], v_now);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$fn$;
"""


def _migration_1(s: str) -> str:
    now = _now_ms()
    return f"""
CREATE TABLE {s}.jobs (
    name text PRIMARY KEY,
    mark bigint,
    won bigint,
    fencing bigint NOT NULL DEFAULT 0,
    run_count bigint NOT NULL DEFAULT 0
);

CREATE TABLE {s}.runs (
    job text NOT NULL,
    slot_ms bigint NOT NULL,
    manual boolean NOT NULL,
    status text NOT NULL,
    instance text NOT NULL,
    attempt integer NOT NULL,
    fencing bigint,
    catch_up boolean NOT NULL,
    missed integer NOT NULL,
    started_at timestamptz,
    finished_at timestamptz,
    duration_ms bigint,
    error text,
    token text NOT NULL,
    lease_ms bigint NOT NULL,
    expires_ms bigint NOT NULL,
    handed_over boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job, slot_ms, manual)
);

-- Running runs by lease expiry: the abandon step and take-over read the
-- expired end, the overlap check the live end, never the whole history.
CREATE INDEX runs_running ON {s}.runs (job, expires_ms) WHERE status = 'running';

CREATE FUNCTION {s}.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $fn$ SELECT {now} $fn$;

-- History: keep the newest `size` records of a job (and every running one),
-- then drop finished records older than the TTL. The contract keeps "at
-- least `size`", so claims call this once the count is size/16 past the size
-- (sizes under 16 exactly), and a 1,000-run history is cut every 62 claims.
CREATE FUNCTION {s}.trim_history(p_job text, p_count bigint, p_size bigint, p_ttl bigint, p_now bigint)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF p_count > p_size THEN
        WITH cut AS (
            SELECT slot_ms, manual FROM {s}.runs WHERE job = p_job
                ORDER BY slot_ms, manual OFFSET p_count - p_size LIMIT 1
        ), gone AS (
            DELETE FROM {s}.runs x USING cut
                WHERE x.job = p_job AND x.status <> 'running'
                  AND (x.slot_ms, x.manual) < (cut.slot_ms, cut.manual)
                RETURNING 1
        )
        UPDATE {s}.jobs SET run_count = run_count - d.n
            FROM (SELECT count(*) AS n FROM gone) AS d
            WHERE name = p_job AND d.n > 0;
    END IF;
    IF p_ttl IS NOT NULL THEN
        WITH gone AS (
            DELETE FROM {s}.runs WHERE job = p_job AND status <> 'running' AND slot_ms < p_now - p_ttl
                RETURNING 1
        )
        UPDATE {s}.jobs SET run_count = run_count - d.n
            FROM (SELECT count(*) AS n FROM gone) AS d
            WHERE name = p_job AND d.n > 0;
    END IF;
END
$fn$;

{_claim_function(s)}
-- Grant the expired runs of these jobs to p_instance, or mark them abandoned
-- (MemoryStore.take_over). Jobs with nothing expired are never locked.
CREATE FUNCTION {s}.take_over(
    p_job text[], p_max_attempts integer[], p_lease bigint[], p_instance text
) RETURNS TABLE (
    o_job text, o_slot_ms bigint, o_manual boolean, o_token text, o_attempt integer, o_fencing bigint,
    o_catch_up boolean, o_missed integer, o_started_at timestamptz, o_lease_ms bigint
) LANGUAGE plpgsql AS $fn$
DECLARE
    c record;
    v_jobs text[];
    v_now bigint;
    v_fencing bigint;
BEGIN
    v_now := {now};
    SELECT array_agg(DISTINCT job ORDER BY job) INTO v_jobs FROM {s}.runs
        WHERE status = 'running' AND expires_ms <= v_now AND job = ANY (p_job);
    IF v_jobs IS NULL THEN
        RETURN;
    END IF;
    PERFORM 1 FROM {s}.jobs WHERE name = ANY (v_jobs) ORDER BY name FOR UPDATE;
    v_now := {now};

    FOR c IN
        SELECT r.job, r.slot_ms, r.manual, r.token, r.attempt, r.handed_over, j.won, x.max_attempts, x.lease
        FROM {s}.runs r
        JOIN {s}.jobs j ON j.name = r.job
        JOIN (
            SELECT DISTINCT ON (u.job) u.job, u.max_attempts, u.lease
            FROM unnest(p_job, p_max_attempts, p_lease) AS u(job, max_attempts, lease)
        ) x ON x.job = r.job
        WHERE r.job = ANY (v_jobs) AND r.status = 'running' AND r.expires_ms <= v_now
        ORDER BY r.job, r.slot_ms, r.manual
    LOOP
        -- The newest run is the newest slot won: a slot skipped for a dead run moved the mark but ran nothing.
        IF NOT (c.manual OR c.slot_ms IS NOT DISTINCT FROM c.won)
           OR (c.attempt >= c.max_attempts AND NOT c.handed_over) THEN
            UPDATE {s}.runs SET status = 'abandoned'
                WHERE job = c.job AND slot_ms = c.slot_ms AND manual = c.manual
                  AND token = c.token AND status = 'running' AND expires_ms <= v_now;
        ELSE
            UPDATE {s}.jobs SET fencing = fencing + 1 WHERE name = c.job RETURNING fencing INTO v_fencing;
            UPDATE {s}.runs SET
                    token = replace(gen_random_uuid()::text, '-', ''),
                    handed_over = false,
                    lease_ms = c.lease,
                    expires_ms = v_now + c.lease,
                    instance = p_instance,
                    -- a hand-over is no death: the run goes on as the same attempt
                    attempt = attempt + CASE WHEN c.handed_over THEN 0 ELSE 1 END,
                    fencing = v_fencing,
                    started_at = timestamptz 'epoch' + v_now * interval '1 millisecond'
                WHERE job = c.job AND slot_ms = c.slot_ms AND manual = c.manual
                  AND token = c.token AND status = 'running' AND expires_ms <= v_now
                RETURNING job, slot_ms, manual, token, attempt, fencing, catch_up, missed, started_at, lease_ms
                INTO o_job, o_slot_ms, o_manual, o_token, o_attempt, o_fencing, o_catch_up, o_missed,
                     o_started_at, o_lease_ms;
            IF FOUND THEN
                RETURN NEXT;
            END IF;
        END IF;
    END LOOP;
END
$fn$;
"""


def _migration_2(s: str) -> str:
    """The claim function names the mark it found (``o_previous_mark``): a new result column, so drop and create."""
    return f"""
DROP FUNCTION {s}.claim(
    text[], bigint[], boolean[], text[], text[], timestamptz[], boolean[], integer[], bigint[],
    boolean[], bigint[], bigint[]
);
{_claim_function(s)}
"""


#: Migration n (1-based) brings the schema from version n-1 to n. Append only,
#: and keep each one compatible with the releases before it: an instance of an
#: older release finds a newer schema and keeps working (rolling upgrades).
_MIGRATIONS = (_migration_1, _migration_2)
SCHEMA_VERSION = len(_MIGRATIONS)


async def _version(conn: asyncpg.Connection, schema: str, quoted: str) -> int:
    # pg_tables is read with the statement's snapshot; to_regclass() would
    # consult a syscache that an advisory lock does not refresh, and miss the
    # table another instance just created.
    exists = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'schema_version')",
        schema,
    )
    if not exists:
        return 0
    return int(await conn.fetchval(f"SELECT coalesce(max(version), 0) FROM {quoted}.schema_version"))


async def ensure_schema(conn: asyncpg.Connection, schema: str) -> bool:
    """Create or upgrade the schema; ``True`` when this call changed it.

    Many instances start at once: the check runs again under a
    transaction-scoped advisory lock, so exactly one of them creates the
    tables and the others find them made. A schema already at the current
    version is left alone without taking the lock or needing CREATE rights.
    """
    quoted = quote_schema(schema)
    if await _version(conn, schema, quoted) >= SCHEMA_VERSION:
        return False
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_CLASS, schema)
        current = await _version(conn, schema, quoted)
        if current >= SCHEMA_VERSION:
            return False
        for version, statement in migration_steps(quoted, current):
            await conn.execute(statement)
            if version:
                log.info("anarchon-postgres: schema %s migrated to version %d", schema, version)
    return True


def migration_steps(quoted: str, current: int) -> list[tuple[int, str]]:
    """The statements that bring a schema from version ``current`` to :data:`SCHEMA_VERSION`, in order.

    Each comes with the version it completes (0 for the set-up before the
    first). :func:`ensure_schema` runs them under its advisory lock;
    :func:`migration_script` prints them for a DBA, so both are one list.
    """
    steps = [
        (0, f"CREATE SCHEMA IF NOT EXISTS {quoted}"),
        (
            0,
            f"CREATE TABLE IF NOT EXISTS {quoted}.schema_version ("
            "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        ),
    ]
    for version in range(current + 1, SCHEMA_VERSION + 1):
        steps.append((0, _MIGRATIONS[version - 1](quoted).strip()))
        steps.append((version, f"INSERT INTO {quoted}.schema_version (version) VALUES ({int(version)})"))
    return steps


async def installed_version(conn: asyncpg.Connection, schema: str) -> int:
    """The schema's version as found, 0 when it has no anarchon tables; reads only."""
    return await _version(conn, schema, quote_schema(schema))


def migration_script(schema: str, current: int) -> str:
    """A psql script applying what :func:`ensure_schema` would, for a DBA to read and run.

    One transaction under the same advisory lock as :meth:`PostgresBackend.start`,
    so it is safe while instances start.
    """
    quoted = quote_schema(schema)
    if current >= SCHEMA_VERSION:
        return f"-- schema {schema} is at version {current}; this release needs {SCHEMA_VERSION}: nothing to apply\n"
    body = ";\n\n".join(statement.rstrip().rstrip(";") for _, statement in migration_steps(quoted, current))
    return (
        f"-- anarchon-postgres: schema {schema} from version {current} to {SCHEMA_VERSION}\n"
        "BEGIN;\n"
        f"SELECT pg_advisory_xact_lock({_LOCK_CLASS}, hashtext('{schema}'));\n\n"
        f"{body};\n\nCOMMIT;\n"
    )
