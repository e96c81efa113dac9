SELECT slot_ms, manual, status FROM anarchon_runs WHERE job = ? ORDER BY slot_ms, manual LIMIT ?
