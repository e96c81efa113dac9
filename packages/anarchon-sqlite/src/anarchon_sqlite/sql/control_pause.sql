INSERT OR REPLACE INTO anarchon_pauses (job, since_ms, until_ms, reason, paused_by) VALUES (?, ?, NULL, ?, ?)
