-- Version 6: finishes and renewals decided row by row, by primary key.
--
-- Versions 1-5 sent a batch of finishes (and of renewals) as one
-- `UPDATE runs … FROM unnest(…)`. Its plan depends on the statistics of
-- `runs`: once autovacuum's ANALYZE has seen few rows with status 'running'
-- (they live for milliseconds), the planner estimated one row from the
-- `runs_running` index and chose a nested loop that compared every running
-- run with every finish: 1,000 finishes took 400-550 ms instead of 25 ms
-- (auto_explain: "Rows Removed by Join Filter: 999000"), and at 1,000
-- every-second jobs each job's next slot found its previous run not yet
-- finished and was skipped for overlap (whole seconds of a soak with
-- autovacuum on, benchmarks/results/2026-12-02-fleet-scale.md). A server
-- with autovacuum off never analyzed the table and never saw it.
--
-- Here each finish is its own UPDATE by primary key inside one function
-- call (one round trip, one commit, as before): whatever the statistics,
-- every plan the planner can pick for `job = $1 AND slot_ms = $2 …` reads
-- one job's rows, so a batch costs its length, measured 50 ms per 1,000
-- with or without a fresh ANALYZE. Older releases keep their statements.

-- The finishes of a batch; the ones that wrote their record come back. With
-- p_retry (the same batch sent again after a lost connection) a record this
-- batch already wrote also counts as finished, as finish_many_retry decides.
CREATE FUNCTION @schema@.finish_many(
    p_retry boolean, p_job text[], p_slot bigint[], p_manual boolean[], p_token text[], p_status text[],
    p_instance text[], p_attempt integer[], p_fencing bigint[], p_catch_up boolean[], p_missed integer[],
    p_started timestamptz[], p_finished timestamptz[], p_duration bigint[], p_error text[]
) RETURNS TABLE (o_job text, o_slot bigint, o_manual boolean, o_token text) LANGUAGE plpgsql AS $fn$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_job, 1), 0) LOOP
        UPDATE @schema@.runs r SET status = p_status[i], instance = p_instance[i], attempt = p_attempt[i],
                fencing = p_fencing[i], catch_up = p_catch_up[i], missed = p_missed[i],
                started_at = p_started[i], finished_at = p_finished[i], duration_ms = p_duration[i],
                error = p_error[i], expires_ms = @now_ms@
            WHERE r.job = p_job[i] AND r.slot_ms = p_slot[i] AND r.manual = p_manual[i] AND r.token = p_token[i]
              AND (r.status = 'running' OR (p_retry AND r.status = p_status[i] AND r.attempt = p_attempt[i]
                   AND r.finished_at IS NOT DISTINCT FROM p_finished[i]))
            RETURNING r.job, r.slot_ms, r.manual, r.token INTO o_job, o_slot, o_manual, o_token;
        IF FOUND THEN
            RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;

-- Renew the leases still ours (same token, running, not handed over); the renewed ones come back.
CREATE FUNCTION @schema@.renew_many(p_job text[], p_slot bigint[], p_manual boolean[], p_token text[])
RETURNS TABLE (o_job text, o_slot bigint, o_manual boolean, o_token text) LANGUAGE plpgsql AS $fn$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_job, 1), 0) LOOP
        UPDATE @schema@.runs r SET expires_ms = @now_ms@ + r.lease_ms
            WHERE r.job = p_job[i] AND r.slot_ms = p_slot[i] AND r.manual = p_manual[i] AND r.token = p_token[i]
              AND r.status = 'running' AND NOT r.handed_over
            RETURNING r.job, r.slot_ms, r.manual, r.token INTO o_job, o_slot, o_manual, o_token;
        IF FOUND THEN
            RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;
