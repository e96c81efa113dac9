-- Version 5: steering the fleet. A job's pause (one row per job ever paused;
-- until_ms is NULL while it lasts) and the run requests not yet taken.
-- Instances of older releases ignore both tables: they neither pause nor
-- take requests, so pause and trigger need every instance on this release.
CREATE TABLE @schema@.pauses (
    job text PRIMARY KEY,
    since_ms bigint NOT NULL,
    until_ms bigint,
    reason text,
    paused_by text
);

CREATE TABLE @schema@.requests (
    job text NOT NULL,
    slot_ms bigint NOT NULL,
    requested_by text,
    PRIMARY KEY (job, slot_ms)
);

-- Decide scheduled claims of jobs the caller believes paused, in order, each
-- under its job row's lock as claim() decides: 'none' where the stored pause
-- does not cover the slot (the caller claims it as usual); 'paused' for a slot
-- recorded paused here (or a retry of that claim); 'lost' for a slot decided
-- already. A paused slot moves the mark, not won and not fencing.
CREATE FUNCTION @schema@.claim_paused(
    p_job text[], p_slot bigint[], p_token text[], p_instance text[], p_started timestamptz[],
    p_catch_up boolean[], p_missed integer[], p_lease bigint[], p_size bigint[], p_ttl bigint[]
) RETURNS TABLE (o_n integer, o_outcome text) LANGUAGE plpgsql AS $fn$
DECLARE
    v_since bigint;
    v_until bigint;
    v_mark bigint;
    v_count bigint;
    v_token text;
    v_status text;
    v_now bigint;
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_job, 1), 0) LOOP
        o_n := i;
        SELECT since_ms, until_ms INTO v_since, v_until FROM @schema@.pauses WHERE job = p_job[i];
        IF NOT FOUND OR (v_until IS NOT NULL AND (p_slot[i] < v_since OR p_slot[i] > v_until)) THEN
            o_outcome := 'none';
            RETURN NEXT;
            CONTINUE;
        END IF;
        INSERT INTO @schema@.jobs (name) VALUES (p_job[i]) ON CONFLICT DO NOTHING;
        SELECT mark INTO v_mark FROM @schema@.jobs WHERE name = p_job[i] FOR UPDATE;
        SELECT token, status INTO v_token, v_status FROM @schema@.runs
            WHERE job = p_job[i] AND slot_ms = p_slot[i] AND NOT manual;
        IF FOUND THEN
            o_outcome := CASE WHEN v_token = p_token[i] AND v_status = 'paused' THEN 'paused' ELSE 'lost' END;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_mark IS NOT NULL AND p_slot[i] <= v_mark THEN
            o_outcome := 'lost';
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_now := @now_ms@;
        INSERT INTO @schema@.runs VALUES (
            p_job[i], p_slot[i], false, 'paused', p_instance[i], 1, NULL, p_catch_up[i], p_missed[i],
            p_started[i], p_started[i], 0, NULL, p_token[i], p_lease[i], v_now, false
        );
        UPDATE @schema@.jobs SET mark = p_slot[i], run_count = run_count + 1 WHERE name = p_job[i]
            RETURNING run_count INTO v_count;
        IF v_count > p_size[i] + p_size[i] / 16 OR p_ttl[i] IS NOT NULL THEN
            PERFORM @schema@.trim_history(p_job[i], v_count, p_size[i], p_ttl[i], v_now);
        END IF;
        o_outcome := 'paused';
        RETURN NEXT;
    END LOOP;
END
$fn$;
