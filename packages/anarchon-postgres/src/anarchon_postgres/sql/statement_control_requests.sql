-- The run requests not older than $1 ms, oldest slot first.
SELECT job, slot_ms, requested_by FROM @schema@.requests WHERE slot_ms >= @now_ms@ - $1 ORDER BY slot_ms, job
