UPDATE anarchon_runs SET instance = ?, attempt = ?, fencing = ?, started_at_us = ?, token = ?, lease_ms = ?, expires_ms = ?, handed_over = 0 WHERE job = ? AND slot_ms = ? AND manual = ?
