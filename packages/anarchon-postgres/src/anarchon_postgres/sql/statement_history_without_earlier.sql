-- history.sql for a look (start_read_only) at a schema from before version 12, whose runs have no earlier.
SELECT job, slot_ms, manual, status, instance, attempt, fencing, catch_up, missed,
    started_at, finished_at, duration_ms, error
FROM @schema@.runs WHERE job = $1 ORDER BY slot_ms DESC, manual DESC LIMIT $2
