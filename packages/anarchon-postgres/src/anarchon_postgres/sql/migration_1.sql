CREATE TABLE @schema@.jobs (
    name text PRIMARY KEY,
    mark bigint,
    won bigint,
    fencing bigint NOT NULL DEFAULT 0,
    run_count bigint NOT NULL DEFAULT 0
);

CREATE TABLE @schema@.runs (
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
CREATE INDEX runs_running ON @schema@.runs (job, expires_ms) WHERE status = 'running';

CREATE FUNCTION @schema@.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $fn$ SELECT @now_ms@ $fn$;

-- History: keep the newest `size` records of a job (and every running one),
-- then drop finished records older than the TTL. The contract keeps "at
-- least `size`", so claims call this once the count is size/16 past the size
-- (sizes under 16 exactly), and a 1,000-run history is cut every 62 claims.
CREATE FUNCTION @schema@.trim_history(p_job text, p_count bigint, p_size bigint, p_ttl bigint, p_now bigint)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF p_count > p_size THEN
        WITH cut AS (
            SELECT slot_ms, manual FROM @schema@.runs WHERE job = p_job
                ORDER BY slot_ms, manual OFFSET p_count - p_size LIMIT 1
        ), gone AS (
            DELETE FROM @schema@.runs x USING cut
                WHERE x.job = p_job AND x.status <> 'running'
                  AND (x.slot_ms, x.manual) < (cut.slot_ms, cut.manual)
                RETURNING 1
        )
        UPDATE @schema@.jobs SET run_count = run_count - d.n
            FROM (SELECT count(*) AS n FROM gone) AS d
            WHERE name = p_job AND d.n > 0;
    END IF;
    IF p_ttl IS NOT NULL THEN
        WITH gone AS (
            DELETE FROM @schema@.runs WHERE job = p_job AND status <> 'running' AND slot_ms < p_now - p_ttl
                RETURNING 1
        )
        UPDATE @schema@.jobs SET run_count = run_count - d.n
            FROM (SELECT count(*) AS n FROM gone) AS d
            WHERE name = p_job AND d.n > 0;
    END IF;
END
$fn$;


-- @include claim_function.sql

-- @include take_over_function.sql
