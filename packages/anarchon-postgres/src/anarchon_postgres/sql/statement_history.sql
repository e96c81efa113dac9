-- A job's newest records, newest slot first.
SELECT job, slot_ms, manual, status, instance, attempt, fencing, catch_up, missed,
    started_at, finished_at, duration_ms, error, earlier
FROM @schema@.runs WHERE job = $1 ORDER BY slot_ms DESC, manual DESC LIMIT $2
