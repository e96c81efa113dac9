-- One finish's record ($5-$14) onto the run the finisher owns ($1-$4: job, slot, manual, token).
UPDATE @schema@.runs SET status = $5, instance = $6, attempt = $7, fencing = $8, catch_up = $9,
    missed = $10, started_at = $11, finished_at = $12, duration_ms = $13, error = $14,
    expires_ms = @now_ms@
WHERE job = $1 AND slot_ms = $2 AND manual = $3 AND token = $4
