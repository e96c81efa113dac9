-- A stopping owner hands its run over: the lease ends now, the attempt count stays.
UPDATE @schema@.runs SET handed_over = true, expires_ms = @now_ms@
WHERE job = $1 AND slot_ms = $2 AND manual = $3 AND token = $4 AND status = 'running'
RETURNING true
