SELECT job, since_ms, until_ms, reason, paused_by FROM anarchon_pauses ORDER BY job
