-- A run request at now, or one millisecond after the job's newest request if that is at or past now;
-- requests older than $3 ms are deleted first. A concurrent request at the same slot makes this
-- insert nothing, and the caller asks again.
WITH old AS (DELETE FROM @schema@.requests WHERE slot_ms < @now_ms@ - $3)
INSERT INTO @schema@.requests (job, slot_ms, requested_by)
SELECT $1, greatest(@now_ms@, coalesce((SELECT max(slot_ms) + 1 FROM @schema@.requests WHERE job = $1), 0)),
    $2 ON CONFLICT DO NOTHING RETURNING slot_ms
