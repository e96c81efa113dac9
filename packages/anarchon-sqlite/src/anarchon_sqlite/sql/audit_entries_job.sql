SELECT id, entry FROM anarchon_audit WHERE job = ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2
