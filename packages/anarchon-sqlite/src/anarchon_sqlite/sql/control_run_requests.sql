SELECT job, slot_ms, requested_by FROM anarchon_requests WHERE slot_ms >= ? ORDER BY slot_ms, job
