DELETE FROM anarchon_runs WHERE job = ? AND slot_ms = ? AND manual = 0 AND status = 'skipped'
