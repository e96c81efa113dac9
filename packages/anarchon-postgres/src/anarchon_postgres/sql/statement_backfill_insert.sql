-- The won slot's running row: $1 job, $2 slot, $3 instance, $4 fencing, $5 catch_up, $6 missed,
-- $7 started_at, $8 token, $9 lease ms (the lease ends at the server's now + $9).
INSERT INTO @schema@.runs (job, slot_ms, manual, status, instance, attempt, fencing, catch_up, missed,
    started_at, finished_at, duration_ms, error, token, lease_ms, expires_ms, handed_over)
VALUES ($1, $2, false, 'running', $3, 1, $4, $5, $6, $7, NULL, NULL, NULL, $8, $9,
    @schema@.now_ms() + $9, false)
