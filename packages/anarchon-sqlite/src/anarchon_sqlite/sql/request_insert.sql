INSERT INTO anarchon_requests (job, slot_ms, requested_by) VALUES (?, ?, ?)
