-- A pause ends now (never before it began); a job not paused returns no row.
UPDATE @schema@.pauses SET until_ms = greatest(since_ms, @now_ms@) WHERE job = $1 AND until_ms IS NULL
RETURNING job, since_ms, until_ms, reason, paused_by
