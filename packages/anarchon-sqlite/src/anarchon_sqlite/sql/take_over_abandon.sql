UPDATE anarchon_runs SET status = 'abandoned' WHERE job = ? AND slot_ms = ? AND manual = ?
