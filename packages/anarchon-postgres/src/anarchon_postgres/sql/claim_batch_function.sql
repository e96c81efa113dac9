-- Decide a batch of scheduled claims, one job each (the client sends manual
-- runs and repeated jobs to claim()). Same answers, same columns as claim(),
-- plus two outcomes the client acts on:
--   'pending': another transaction holds the job row (skip mode only); call
--              again with p_wait, which waits for it (and usually then finds
--              the slot decided);
--   'general': a new job, or a late slot that may have to be recorded skipped;
--              claim() decides it.
-- 1. The marks as committed are read without a lock: a slot at or below one
--    is decided already (mark only grows), so most losers lock nothing.
-- 2. The open slots' job rows are locked in name order; without p_wait,
--    SKIP LOCKED: instances that arrive together share the batch instead of
--    queueing behind each other, and never wait on a job row.
-- 3. The locked slots are decided in one statement, as claim()'s general
--    path decides one: abandon expired older runs (lease or owner's
--    heartbeat, as in claim()), test overlap, move the
--    mark, count fencing, write the record.
CREATE OR REPLACE FUNCTION @schema@.claim_batch(
    p_wait boolean, p_job text[], p_slot bigint[], p_token text[], p_instance text[],
    p_started timestamptz[], p_catch_up boolean[], p_missed integer[], p_lease bigint[],
    p_skip boolean[], p_size bigint[], p_ttl bigint[]
) RETURNS TABLE (
    o_n integer, o_outcome text, o_instance text, o_attempt integer, o_fencing bigint,
    o_catch_up boolean, o_missed integer, o_started_at timestamptz, o_finished_at timestamptz,
    o_duration_ms bigint, o_lease_ms bigint, o_supersedes bigint, o_previous_mark bigint
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_exists boolean[];
    v_seen bigint[];
    v_locked boolean[];
    v_mark bigint[];
    v_won bigint[];
    v_skipped boolean[];
    v_fencing bigint[];
    v_count bigint[];
    v_gone bigint[];
    v_now bigint;
    v_dead text[];
    v_cut bigint;
    i integer;
BEGIN
    SELECT array_agg(j.name IS NOT NULL ORDER BY c.n), array_agg(j.mark ORDER BY c.n)
        INTO v_exists, v_seen
        FROM unnest(p_job) WITH ORDINALITY AS c(job, n)
        LEFT JOIN @schema@.jobs j ON j.name = c.job;

    IF p_wait THEN
        WITH l AS (
            SELECT name, mark, won FROM @schema@.jobs
                WHERE name IN (
                    SELECT c.job FROM unnest(p_job, p_slot, v_exists, v_seen) AS c(job, slot, ex, seen)
                        WHERE c.ex AND (c.seen IS NULL OR c.slot > c.seen)
                )
                ORDER BY name FOR UPDATE
        )
        SELECT array_agg(l.name IS NOT NULL ORDER BY c.n), array_agg(l.mark ORDER BY c.n),
               array_agg(l.won ORDER BY c.n)
            INTO v_locked, v_mark, v_won
            FROM unnest(p_job) WITH ORDINALITY AS c(job, n) LEFT JOIN l ON l.name = c.job;
    ELSE
        WITH l AS (
            SELECT name, mark, won FROM @schema@.jobs
                WHERE name IN (
                    SELECT c.job FROM unnest(p_job, p_slot, v_exists, v_seen) AS c(job, slot, ex, seen)
                        WHERE c.ex AND (c.seen IS NULL OR c.slot > c.seen)
                )
                ORDER BY name FOR UPDATE SKIP LOCKED
        )
        SELECT array_agg(l.name IS NOT NULL ORDER BY c.n), array_agg(l.mark ORDER BY c.n),
               array_agg(l.won ORDER BY c.n)
            INTO v_locked, v_mark, v_won
            FROM unnest(p_job) WITH ORDINALITY AS c(job, n) LEFT JOIN l ON l.name = c.job;
    END IF;
    v_now := @now_ms@;
    -- The owners whose heartbeat expired (as a rule none), read once for the
    -- whole batch: each running run is then tested against one array, not
    -- probed in `instances` per run and statement. A record revived since
    -- belongs to an owner that gave its earlier runs up before it expired
    -- (anarchon.liveness), and the locked jobs get no new run meanwhile.
    v_dead := ARRAY(SELECT d.instance FROM @schema@.instances d WHERE d.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now));
    -- With nobody dead, only runs whose lease expired can be abandoned: `gone`
    -- then reads the expired end of the index of running runs alone, as
    -- before liveness, instead of every running run of every job.
    v_cut := CASE WHEN cardinality(v_dead) = 0 THEN v_now ELSE 9223372036854775807 END;

    -- `busy` is materialized so its test runs once per claim; the abandon and
    -- the overlap test touch disjoint rows, so one snapshot serves both.
    WITH w AS (
        SELECT c.* FROM unnest(
                p_job, p_slot, p_token, p_instance, p_started, p_catch_up, p_missed, p_lease, p_skip,
                v_locked, v_mark, v_won
            ) WITH ORDINALITY AS c(job, slot, token, instance, started, catch_up, missed, lease, skip,
                                   locked, mark, won, n)
            WHERE c.locked AND (c.mark IS NULL OR c.slot > c.mark)
    ), gone AS (
        UPDATE @schema@.runs r SET status = 'abandoned' FROM w
            WHERE r.job = w.job AND r.status = 'running' AND NOT r.manual
              AND r.slot_ms < w.slot AND r.expires_ms <= v_cut
              AND (r.expires_ms <= v_now OR r.instance = ANY (v_dead))
            RETURNING w.n, w.won, r.slot_ms
    ), sup AS (  -- the dead run abandoned here was the newest slot won: the claim supersedes it
        SELECT g.n, max(g.slot_ms) AS slot_ms FROM gone g WHERE g.slot_ms = g.won GROUP BY g.n
    ), busy AS MATERIALIZED (
        SELECT w.*, w.skip AND EXISTS (
            SELECT 1 FROM @schema@.runs x WHERE x.job = w.job AND x.status = 'running' AND x.expires_ms > v_now
                AND x.instance <> ALL (v_dead)
        ) AS skipped
        FROM w
    ), j AS (
        -- Each CTE joins the one before by the job row only: the planner cannot
        -- count the rows of an unnest(), and a join of two CTEs on `n` became a
        -- nested loop over a million pairs.
        UPDATE @schema@.jobs t SET
                mark = b.slot,
                won = CASE WHEN b.skipped THEN t.won ELSE b.slot END,
                fencing = CASE WHEN b.skipped THEN t.fencing ELSE t.fencing + 1 END,
                run_count = t.run_count + 1
            FROM busy b
            WHERE t.name = b.job
            RETURNING b.n, b.job, b.slot, b.instance, b.catch_up, b.missed, b.started, b.token, b.lease,
                      b.skipped, CASE WHEN b.skipped THEN NULL ELSE t.fencing END AS fencing, t.run_count
    ), ins AS (
        INSERT INTO @schema@.runs SELECT
                j.job, j.slot, false, CASE WHEN j.skipped THEN 'skipped' ELSE 'running' END,
                j.instance, 1, j.fencing, j.catch_up, j.missed, j.started,
                CASE WHEN j.skipped THEN j.started END, CASE WHEN j.skipped THEN 0::bigint END, NULL,
                j.token, j.lease, CASE WHEN j.skipped THEN v_now ELSE v_now + j.lease END, false
            FROM j
    )
    SELECT array_agg(j.skipped ORDER BY c.n), array_agg(j.fencing ORDER BY c.n),
           array_agg(j.run_count ORDER BY c.n), array_agg(CASE WHEN NOT j.skipped THEN sup.slot_ms END ORDER BY c.n)
        INTO v_skipped, v_fencing, v_count, v_gone
        FROM generate_series(1, coalesce(array_length(p_job, 1), 0)) AS c(n)
        LEFT JOIN j ON j.n = c.n LEFT JOIN sup ON sup.n = c.n;

    -- History past its size (by a sixteenth, as claim() does) or with a TTL is cut per job.
    FOR i IN
        SELECT c.n FROM unnest(v_count, p_size, p_ttl) WITH ORDINALITY AS c(cnt, size, ttl, n)
            WHERE c.cnt IS NOT NULL AND (c.cnt > c.size + c.size / 16 OR c.ttl IS NOT NULL)
    LOOP
        PERFORM @schema@.trim_history(p_job[i], v_count[i], p_size[i], p_ttl[i], v_now);
    END LOOP;

    -- Ranked claims (the core's _rank.py): the slots decided here, told at commit to every
    -- instance listening, so a later-ranked one sends no claim for them; fifty to a notice,
    -- which keeps each under pg_notify's 8,000 bytes.
    PERFORM pg_notify(@decided@, string_agg(c.job || ' ' || c.slot, E'\n'))
        FROM unnest(p_job, p_slot, v_count) WITH ORDINALITY AS c(job, slot, cnt, n)
        WHERE c.cnt IS NOT NULL GROUP BY (c.n - 1) / 50;

    -- The answers. A decided slot is lost unless its record carries this
    -- claim's token (a retry: answered as the first time); one with no record
    -- at all, overlap "skip" and an older run still live may have to be
    -- recorded skipped, which claim() does.
    RETURN QUERY
    WITH c AS (
        SELECT u.*,
               (u.ex AND u.seen IS NOT NULL AND u.slot <= u.seen)
                   OR (u.locked AND u.mark IS NOT NULL AND u.slot <= u.mark) AS decided,
               u.locked AND (u.mark IS NULL OR u.slot > u.mark) AS open
            FROM unnest(
                p_job, p_slot, p_token, p_instance, p_started, p_catch_up, p_missed, p_lease, p_skip,
                v_exists, v_seen, v_locked, v_mark, v_skipped, v_fencing, v_gone
            ) WITH ORDINALITY AS u(job, slot, token, instance, started, catch_up, missed, lease, skip,
                                   ex, seen, locked, mark, skipped, fencing, gone, n)
    ), a AS (
        SELECT c.*, r.instance AS r_instance, r.attempt AS r_attempt, r.fencing AS r_fencing,
               r.catch_up AS r_catch_up, r.missed AS r_missed, r.started_at AS r_started,
               r.finished_at AS r_finished, r.duration_ms AS r_duration, r.lease_ms AS r_lease,
               CASE
                   WHEN c.decided THEN CASE
                       WHEN r.token = c.token AND r.status = 'running' THEN 'won'
                       WHEN r.token = c.token AND r.status = 'skipped' THEN 'skipped'
                       WHEN r.job IS NULL AND c.skip AND EXISTS (
                           SELECT 1 FROM @schema@.runs x WHERE x.job = c.job AND x.status = 'running'
                               AND x.expires_ms > v_now AND x.slot_ms < c.slot AND x.instance <> ALL (v_dead)
                       ) THEN 'general'
                       ELSE 'lost'
                   END
                   WHEN c.open THEN CASE WHEN c.skipped THEN 'skipped' ELSE 'won' END
                   WHEN c.ex THEN 'pending'
                   ELSE 'general'
               END AS outcome
            FROM c LEFT JOIN @schema@.runs r
                ON c.decided AND r.job = c.job AND r.slot_ms = c.slot AND NOT r.manual
    )
    SELECT a.n::integer, a.outcome,
           CASE WHEN a.open THEN a.instance ELSE a.r_instance END,
           CASE WHEN a.open THEN 1 ELSE a.r_attempt END,
           CASE WHEN a.open THEN a.fencing ELSE a.r_fencing END,
           CASE WHEN a.open THEN a.catch_up ELSE a.r_catch_up END,
           CASE WHEN a.open THEN a.missed ELSE a.r_missed END,
           CASE WHEN a.open THEN a.started ELSE a.r_started END,
           CASE WHEN a.open THEN (CASE WHEN a.skipped THEN a.started END) ELSE a.r_finished END,
           CASE WHEN a.open THEN (CASE WHEN a.skipped THEN 0::bigint END) ELSE a.r_duration END,
           CASE WHEN a.open THEN a.lease ELSE a.r_lease END,
           CASE WHEN a.open THEN a.gone END,
           CASE WHEN a.open AND NOT a.skipped THEN a.mark END
        FROM a WHERE a.outcome IN ('won', 'skipped')
    UNION ALL
    SELECT a.n::integer, a.outcome, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM a WHERE a.outcome NOT IN ('won', 'skipped');
END
$fn$;
