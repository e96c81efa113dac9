UPDATE anarchon_runs SET handed_over = 1, expires_ms = ? WHERE job = ? AND slot_ms = ? AND manual = ? AND token = ? AND status = 'running'
