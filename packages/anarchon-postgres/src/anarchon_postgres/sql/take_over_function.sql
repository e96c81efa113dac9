-- Grant the expired runs of these jobs to p_instance, or mark them abandoned
-- (MemoryStore.take_over): runs whose lease expired, and runs whose owner's
-- heartbeat record expired (an owner without a record counts as alive).
-- Jobs with nothing expired are never locked.
CREATE OR REPLACE FUNCTION @schema@.take_over(
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
    SELECT array_agg(DISTINCT r.job ORDER BY r.job) INTO v_jobs FROM @schema@.runs r
        WHERE r.status = 'running' AND r.job = ANY (p_job) AND (r.expires_ms <= v_now OR EXISTS (
            SELECT 1 FROM @schema@.instances hb WHERE hb.instance = r.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
        ));
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
        WHERE r.job = ANY (v_jobs) AND r.status = 'running' AND (r.expires_ms <= v_now OR EXISTS (
            SELECT 1 FROM @schema@.instances hb WHERE hb.instance = r.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
        ))
        ORDER BY r.job, r.slot_ms, r.manual
    LOOP
        -- The newest run is the newest slot won: a slot skipped for a dead run moved the mark but ran nothing.
        IF NOT (c.manual OR c.slot_ms IS NOT DISTINCT FROM c.won)
           OR (c.attempt >= c.max_attempts AND NOT c.handed_over) THEN
            UPDATE @schema@.runs r SET status = 'abandoned'
                WHERE r.job = c.job AND r.slot_ms = c.slot_ms AND r.manual = c.manual
                  AND r.token = c.token AND r.status = 'running' AND (r.expires_ms <= v_now OR EXISTS (
                      SELECT 1 FROM @schema@.instances hb WHERE hb.instance = r.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
                  ));
        ELSE
            UPDATE @schema@.jobs SET fencing = fencing + 1 WHERE name = c.job RETURNING fencing INTO v_fencing;
            UPDATE @schema@.runs r SET
                    token = replace(gen_random_uuid()::text, '-', ''),
                    handed_over = false,
                    lease_ms = c.lease,
                    expires_ms = v_now + c.lease,
                    instance = p_instance,
                    -- a hand-over is no death: the run goes on as the same attempt
                    attempt = attempt + CASE WHEN c.handed_over THEN 0 ELSE 1 END,
                    -- the attempt that died (not one handed over), kept: history shows every attempt (version 12)
                    earlier = CASE WHEN c.handed_over THEN r.earlier ELSE coalesce(r.earlier, '[]'::jsonb)
                        || jsonb_build_array(jsonb_build_object('attempt', r.attempt, 'instance', r.instance,
                                                                'fencing', r.fencing, 'started_at', r.started_at)) END,
                    fencing = v_fencing,
                    started_at = timestamptz 'epoch' + v_now * interval '1 millisecond'
                WHERE r.job = c.job AND r.slot_ms = c.slot_ms AND r.manual = c.manual AND r.token = c.token
                  AND r.status = 'running' AND (r.expires_ms <= v_now OR EXISTS (
                      SELECT 1 FROM @schema@.instances hb WHERE hb.instance = r.instance AND hb.alive_until < v_now AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= v_now)
                  ))
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
