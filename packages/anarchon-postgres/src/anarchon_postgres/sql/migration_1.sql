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

-- Grant the expired runs of these jobs to p_instance, or mark them abandoned
-- (MemoryStore.take_over). Jobs with nothing expired are never locked.
CREATE FUNCTION @schema@.take_over(
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
    v_now := @now_ms@;
    SELECT array_agg(DISTINCT job ORDER BY job) INTO v_jobs FROM @schema@.runs
        WHERE status = 'running' AND expires_ms <= v_now AND job = ANY (p_job);
    IF v_jobs IS NULL THEN
        RETURN;
    END IF;
    PERFORM 1 FROM @schema@.jobs WHERE name = ANY (v_jobs) ORDER BY name FOR UPDATE;
    v_now := @now_ms@;

    FOR c IN
        SELECT r.job, r.slot_ms, r.manual, r.token, r.attempt, r.handed_over, j.won, x.max_attempts, x.lease
        FROM @schema@.runs r
        JOIN @schema@.jobs j ON j.name = r.job
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
            UPDATE @schema@.runs SET status = 'abandoned'
                WHERE job = c.job AND slot_ms = c.slot_ms AND manual = c.manual
                  AND token = c.token AND status = 'running' AND expires_ms <= v_now;
        ELSE
            UPDATE @schema@.jobs SET fencing = fencing + 1 WHERE name = c.job RETURNING fencing INTO v_fencing;
            UPDATE @schema@.runs SET
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
