-- Forget removed schedules ($1 older_than_ms, $2 REUSE_AFTER_MS), in one statement: tombstones at
-- least $1 old go with their logs; so do the job row, runs, pause and requests of each such name,
-- unless a run of it holds an unexpired lease or its mark is a slot more than $2 after the removal
-- (the name is in use again). The job rows are locked first, so a claim that moved a mark meanwhile
-- is read as it now stands. Answers the names forgotten.
WITH clock AS (
    SELECT @now_ms@ AS now_ms
), old AS (
    DELETE FROM @schema@.schedules s USING clock
    WHERE s.record IS NULL AND s.changed_ms <= clock.now_ms - $1
    RETURNING s.name, s.changed_ms
), logs AS (
    DELETE FROM @schema@.schedule_log l USING old WHERE l.name = old.name
), locked AS (
    SELECT j.name, j.mark FROM @schema@.jobs j JOIN old ON j.name = old.name FOR UPDATE OF j
), free AS (
    SELECT old.name FROM old CROSS JOIN clock LEFT JOIN locked ON locked.name = old.name
    WHERE (locked.mark IS NULL OR locked.mark <= old.changed_ms + $2)
      AND NOT EXISTS (
        SELECT 1 FROM @schema@.runs r
        WHERE r.job = old.name AND r.status = 'running' AND r.expires_ms > clock.now_ms
      )
), runs AS (
    DELETE FROM @schema@.runs r USING free WHERE r.job = free.name
), jobs AS (
    DELETE FROM @schema@.jobs j USING free WHERE j.name = free.name
), pauses AS (
    DELETE FROM @schema@.pauses p USING free WHERE p.job = free.name
), requests AS (
    DELETE FROM @schema@.requests q USING free WHERE q.job = free.name
)
SELECT name FROM free
