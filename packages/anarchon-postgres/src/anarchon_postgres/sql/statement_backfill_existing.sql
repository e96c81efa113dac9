-- The slot's scheduled run, if it has one (the fleet's or an overlapping backfill's).
SELECT job, slot_ms, manual, status, instance, attempt, fencing, catch_up, missed,
    started_at, finished_at, duration_ms, error, token, lease_ms
FROM @schema@.runs WHERE job = $1 AND slot_ms = $2 AND NOT manual
