DELETE FROM anarchon_runs WHERE job = ?1
