-- Decide many claims in one call; the lease rules of anarchon.backend, as
-- MemoryStore.claim applies them, under a row lock on each job. A new slot
-- costs two statements: lock the job row and read the mark (which a won
-- claim reports back as o_previous_mark), then decide and record (a lone
-- claim with overlap "allow" decides in the second, and then abandons
-- expired older runs).
-- Each scheduled slot it records (won, or skipped) is notified on the
-- schema's decided channel at commit, "<job> <slot>" (ranked claims).
-- "Expired" is the lease's expiry or the owner's heartbeat's: a running run
-- whose owner has an `instances` record before the server's now counts as
-- expired (abandoned, no overlap), one whose owner has no record as alive.
CREATE OR REPLACE FUNCTION @schema@.claim(
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
    r @schema@.runs%ROWTYPE;
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
        SELECT mark INTO v_mark FROM @schema@.jobs WHERE name = p_job[1] FOR UPDATE;
        WITH j AS (
            UPDATE @schema@.jobs
                SET mark = p_slot[1], won = p_slot[1], fencing = fencing + 1, run_count = run_count + 1
                WHERE name = p_job[1] AND (mark IS NULL OR mark < p_slot[1]) RETURNING fencing, run_count
        ), ins AS (
            INSERT INTO @schema@.runs SELECT
                p_job[1], p_slot[1], false, 'running', p_instance[1], 1, j.fencing, p_catch_up[1],
                p_missed[1], p_started[1], NULL, NULL, NULL, p_token[1], p_lease[1], @now_ms@ + p_lease[1], false
            FROM j
        )
        SELECT fencing, run_count INTO v_fencing, v_count FROM j;
        IF FOUND THEN
            v_now := @now_ms@;
            PERFORM pg_notify(@decided@, p_job[1] || ' ' || p_slot[1]);  -- ranked claims: the fleet hears it
            WITH gone AS (
                UPDATE @schema@.runs o SET status = 'abandoned'
                    WHERE o.job = p_job[1] AND o.status = 'running' AND NOT o.manual
                      AND o.slot_ms < p_slot[1] AND (o.expires_ms <= v_now OR EXISTS (
                          SELECT 1 FROM @schema@.instances hb WHERE hb.instance = o.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
                      ))
                    RETURNING slot_ms
            )
            SELECT max(slot_ms) INTO v_gone FROM gone;
            -- The update above replaced `won`; the dead run was it when no slot since ran.
            o_supersedes := NULL;
            IF v_gone IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM @schema@.runs WHERE job = p_job[1] AND NOT manual AND status <> 'skipped'
                    AND slot_ms > v_gone AND slot_ms < p_slot[1]
            ) THEN
                o_supersedes := v_gone;
            END IF;
            IF v_count > p_size[1] + p_size[1] / 16 OR p_ttl[1] IS NOT NULL THEN
                PERFORM @schema@.trim_history(p_job[1], v_count, p_size[1], p_ttl[1], v_now);
            END IF;
            o_n := 1; o_outcome := 'won'; o_instance := p_instance[1]; o_attempt := 1; o_fencing := v_fencing;
            o_catch_up := p_catch_up[1]; o_missed := p_missed[1]; o_started_at := p_started[1];
            o_finished_at := NULL; o_duration_ms := NULL; o_lease_ms := p_lease[1]; o_previous_mark := v_mark;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;

    -- Missing job rows are created first, in name order, holding no lock yet,
    -- and only then are the rows locked in name order, so concurrent
    -- multi-job claims queue up instead of deadlocking. (Locking the rows
    -- that existed before creating the others let three claims of new jobs
    -- wait on one another: one waited to create a row another had just
    -- created, which waited to lock a row the first held.)
    IF v_n = 1 THEN
        SELECT mark INTO v_mark FROM @schema@.jobs WHERE name = p_job[1] FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO @schema@.jobs (name) VALUES (p_job[1]) ON CONFLICT (name) DO NOTHING;
            SELECT mark INTO v_mark FROM @schema@.jobs WHERE name = p_job[1] FOR UPDATE;
        END IF;
    ELSIF v_n > 1 THEN
        IF EXISTS (SELECT 1 FROM unnest(p_job) AS j WHERE NOT EXISTS (SELECT 1 FROM @schema@.jobs WHERE name = j)) THEN
            INSERT INTO @schema@.jobs (name)
                SELECT DISTINCT j FROM unnest(p_job) AS j ORDER BY 1
                ON CONFLICT (name) DO NOTHING;
        END IF;
        PERFORM 1 FROM @schema@.jobs WHERE name = ANY (p_job) ORDER BY name FOR UPDATE;
    END IF;
    v_now := @now_ms@;

    FOR i IN 1 .. v_n LOOP
        o_n := i;
        o_outcome := 'lost';
        o_supersedes := NULL;
        o_previous_mark := NULL;
        IF v_n > 1 AND NOT p_manual[i] THEN
            SELECT mark INTO v_mark FROM @schema@.jobs WHERE name = p_job[i];
        END IF;
        -- A scheduled slot above the mark was never decided, so it has no
        -- record to look up; any other slot may be a retry (same token),
        -- which gets its first answer back.
        IF p_manual[i] OR p_slot[i] <= v_mark THEN
            SELECT * INTO r FROM @schema@.runs WHERE job = p_job[i] AND slot_ms = p_slot[i] AND manual = p_manual[i];
            IF FOUND OR NOT p_manual[i] THEN
                IF FOUND AND r.token = p_token[i] AND r.status IN ('skipped', 'running') THEN
                    o_outcome := CASE r.status WHEN 'running' THEN 'won' ELSE 'skipped' END;
                    o_instance := r.instance; o_attempt := r.attempt; o_fencing := r.fencing;
                    o_catch_up := r.catch_up; o_missed := r.missed; o_started_at := r.started_at;
                    o_finished_at := r.finished_at; o_duration_ms := r.duration_ms; o_lease_ms := r.lease_ms;
                ELSIF NOT FOUND AND p_skip[i] AND EXISTS (
                    SELECT 1 FROM @schema@.runs x WHERE x.job = p_job[i] AND x.status = 'running'
                        AND x.expires_ms > v_now AND x.slot_ms < p_slot[i] AND NOT EXISTS (
                            SELECT 1 FROM @schema@.instances hb WHERE hb.instance = x.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
                        )
                ) THEN
                    -- Delayed past a newer slot's claim: too late to run, but overlapped by an older
                    -- run all along, so recorded skipped as it would have been in time (the mark stays).
                    INSERT INTO @schema@.runs VALUES (
                        p_job[i], p_slot[i], false, 'skipped', p_instance[i], 1, NULL, p_catch_up[i], p_missed[i],
                        p_started[i], p_started[i], 0, NULL, p_token[i], p_lease[i], v_now, false
                    );
                    UPDATE @schema@.jobs SET run_count = run_count + 1 WHERE name = p_job[i]
                        RETURNING run_count INTO v_count;
                    PERFORM pg_notify(@decided@, p_job[i] || ' ' || p_slot[i]);
                    o_outcome := 'skipped'; o_instance := p_instance[i]; o_attempt := 1; o_fencing := NULL;
                    o_catch_up := p_catch_up[i]; o_missed := p_missed[i]; o_started_at := p_started[i];
                    o_finished_at := p_started[i]; o_duration_ms := 0; o_lease_ms := p_lease[i];
                    IF v_count > p_size[i] + p_size[i] / 16 OR p_ttl[i] IS NOT NULL THEN
                        PERFORM @schema@.trim_history(p_job[i], v_count, p_size[i], p_ttl[i], v_now);
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
        -- older scheduled runs that expired (lease or owner) are abandoned, and with
        -- overlap "skip" a live run makes the claim skipped. The abandon and
        -- the overlap test touch disjoint rows, so one snapshot serves both;
        -- `busy` is materialized so its test runs once, not once per use.
        WITH gone AS (
            UPDATE @schema@.runs o SET status = 'abandoned'
                WHERE NOT p_manual[i] AND o.job = p_job[i] AND o.status = 'running' AND NOT o.manual
                  AND o.slot_ms < p_slot[i] AND (o.expires_ms <= v_now OR EXISTS (
                      SELECT 1 FROM @schema@.instances hb WHERE hb.instance = o.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
                  ))
                RETURNING slot_ms
        ), prev AS (
            SELECT won FROM @schema@.jobs WHERE name = p_job[i]  -- the statement's snapshot: before `j`
        ), busy AS MATERIALIZED (
            SELECT p_skip[i] AND EXISTS (
                SELECT 1 FROM @schema@.runs x WHERE x.job = p_job[i] AND x.status = 'running'
                    AND x.expires_ms > v_now AND NOT EXISTS (
                        SELECT 1 FROM @schema@.instances hb WHERE hb.instance = x.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
                    )
            ) AS skipped
        ), j AS (
            UPDATE @schema@.jobs
                SET mark = CASE WHEN p_manual[i] THEN mark ELSE p_slot[i] END,
                    won = CASE WHEN p_manual[i] OR busy.skipped THEN won ELSE p_slot[i] END,
                    fencing = CASE WHEN busy.skipped THEN fencing ELSE fencing + 1 END,
                    run_count = run_count + 1
                FROM busy
                WHERE name = p_job[i]
                RETURNING busy.skipped, CASE WHEN busy.skipped THEN NULL ELSE fencing END AS fencing, run_count
        ), ins AS (
            INSERT INTO @schema@.runs SELECT
                p_job[i], p_slot[i], p_manual[i], CASE WHEN j.skipped THEN 'skipped' ELSE 'running' END,
                p_instance[i], 1, j.fencing, p_catch_up[i], p_missed[i], p_started[i],
                CASE WHEN j.skipped THEN p_started[i] END, CASE WHEN j.skipped THEN 0::bigint END, NULL,
                p_token[i], p_lease[i], CASE WHEN j.skipped THEN v_now ELSE v_now + p_lease[i] END, false
            FROM j
        )
        SELECT j.skipped, j.fencing, j.run_count,
               (SELECT max(g.slot_ms) FROM gone g JOIN prev ON g.slot_ms = prev.won)
            INTO v_busy, v_fencing, v_count, v_gone FROM j;
        IF NOT p_manual[i] THEN
            PERFORM pg_notify(@decided@, p_job[i] || ' ' || p_slot[i]);
        END IF;
        o_instance := p_instance[i]; o_attempt := 1; o_fencing := v_fencing; o_catch_up := p_catch_up[i];
        o_missed := p_missed[i]; o_started_at := p_started[i]; o_lease_ms := p_lease[i];
        IF v_busy THEN
            o_outcome := 'skipped'; o_finished_at := p_started[i]; o_duration_ms := 0;
        ELSE
            o_outcome := 'won'; o_finished_at := NULL; o_duration_ms := NULL; o_supersedes := v_gone;
            o_previous_mark := CASE WHEN p_manual[i] THEN NULL ELSE v_mark END;
        END IF;
        IF v_count > p_size[i] + p_size[i] / 16 OR p_ttl[i] IS NOT NULL THEN
            PERFORM @schema@.trim_history(p_job[i], v_count, p_size[i], p_ttl[i], v_now);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$fn$;
