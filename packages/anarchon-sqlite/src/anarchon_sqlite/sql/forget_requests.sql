DELETE FROM anarchon_requests WHERE job = ?1
