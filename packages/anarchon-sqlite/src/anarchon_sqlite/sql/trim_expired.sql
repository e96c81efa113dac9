DELETE FROM anarchon_runs WHERE job = ? AND slot_ms < ? AND status != 'running'
