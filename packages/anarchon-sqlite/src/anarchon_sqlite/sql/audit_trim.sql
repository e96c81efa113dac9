DELETE FROM anarchon_audit WHERE id <= ?1
