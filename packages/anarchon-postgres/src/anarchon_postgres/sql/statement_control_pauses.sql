-- Every job's pause, current or ended, by job.
SELECT job, since_ms, until_ms, reason, paused_by FROM @schema@.pauses ORDER BY job
