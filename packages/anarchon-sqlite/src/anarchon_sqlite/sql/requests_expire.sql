DELETE FROM anarchon_requests WHERE slot_ms < ?
