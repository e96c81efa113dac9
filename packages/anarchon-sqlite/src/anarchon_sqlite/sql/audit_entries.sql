SELECT id, entry FROM anarchon_audit WHERE id < ?1 ORDER BY id DESC LIMIT ?2
