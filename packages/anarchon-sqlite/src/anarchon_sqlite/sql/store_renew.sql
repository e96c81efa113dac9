UPDATE anarchon_runs SET expires_ms = ? + lease_ms WHERE job = ? AND slot_ms = ? AND manual = ? AND token = ? AND status = 'running' AND handed_over = 0
