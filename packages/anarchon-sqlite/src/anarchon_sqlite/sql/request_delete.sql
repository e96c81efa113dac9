DELETE FROM anarchon_requests WHERE job = ? AND slot_ms = ?
