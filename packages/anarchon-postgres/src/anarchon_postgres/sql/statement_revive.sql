-- Revive one scheduled slot recorded skipped for overlap (LeaseBackend.revive): $1 job, $2 slot,
-- $3 token, $4 instance, $5 started_at, $6 catch_up, $7 missed, $8 lease ms. One row (none: the slot
-- has no record, LOST), `outcome` and the record as found:
--   'won'      a retry (the record runs under $3), or revived here (`revived_fencing`);
--   'lost'     the record is neither skipped nor ours running;
--   'skipped'  a run of the job holds an unexpired lease, judged as claim()'s overlap test judges it
--              (lease, and the owner's heartbeat: an owner whose `instances` row expired holds nothing);
--   'again'    the job's fencing moved since this statement's snapshot (a grant committed meanwhile,
--              maybe a live run the snapshot cannot see): nothing was revived; send it again.
-- The job row's update is the gate: every grant (claim, claim_batch, backfill, take-over, revive)
-- moves `fencing` under that row's lock, so a revive either commits before another grant locks the
-- row (which then sees the revived run), or waits for it and finds `fencing` moved (re-read by the
-- update after the wait), and changes nothing. `mark`, `won` and `run_count` stay (one row replaced).
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
), rec AS MATERIALIZED (
    SELECT r.status, r.instance, r.attempt, r.fencing, r.catch_up, r.missed, r.started_at, r.finished_at,
           r.duration_ms, r.error, r.token, r.lease_ms, j.fencing AS job_fencing,
           CASE WHEN r.status = 'skipped' THEN EXISTS (
               SELECT 1 FROM @schema@.runs x WHERE x.job = $1 AND x.status = 'running' AND x.expires_ms > t.now
                   AND NOT EXISTS (
                       SELECT 1 FROM @schema@.instances hb WHERE hb.instance = x.instance AND hb.alive_until < t.now
                   )
           ) END AS held
    FROM @schema@.runs r JOIN @schema@.jobs j ON j.name = r.job, t
    WHERE r.job = $1 AND r.slot_ms = $2 AND NOT r.manual
), won AS (
    UPDATE @schema@.jobs j SET fencing = j.fencing + 1 FROM rec
        WHERE j.name = $1 AND rec.status = 'skipped' AND NOT rec.held AND j.fencing = rec.job_fencing
        RETURNING j.fencing
), revived AS (
    UPDATE @schema@.runs r SET status = 'running', instance = $4, attempt = 1, fencing = won.fencing,
            catch_up = $6, missed = $7, started_at = $5, finished_at = NULL, duration_ms = NULL, error = NULL,
            token = $3, lease_ms = $8, expires_ms = t.now + $8, handed_over = false
        FROM won, t
        WHERE r.job = $1 AND r.slot_ms = $2 AND NOT r.manual AND r.status = 'skipped'
        RETURNING r.fencing
)
SELECT CASE
           WHEN rec.token = $3 AND rec.status = 'running' THEN 'won'
           WHEN rec.status <> 'skipped' THEN 'lost'
           WHEN rec.held THEN 'skipped'
           WHEN revived.fencing IS NOT NULL THEN 'won'
           ELSE 'again'
       END AS outcome,
       revived.fencing AS revived_fencing, rec.status, rec.instance, rec.attempt, rec.fencing, rec.catch_up,
       rec.missed, rec.started_at, rec.finished_at, rec.duration_ms, rec.error, rec.lease_ms
FROM rec LEFT JOIN revived ON true
