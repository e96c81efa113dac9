-- A job already paused keeps its since; a resumed one starts a new pause.
INSERT INTO @schema@.pauses AS p (job, since_ms, until_ms, reason, paused_by)
VALUES ($1, @now_ms@, NULL, $2, $3)
ON CONFLICT (job) DO UPDATE SET since_ms = CASE WHEN p.until_ms IS NULL THEN p.since_ms
    ELSE excluded.since_ms END, until_ms = NULL, reason = excluded.reason, paused_by = excluded.paused_by
RETURNING job, since_ms, until_ms, reason, paused_by
