DELETE FROM anarchon_pauses WHERE job = ?1
