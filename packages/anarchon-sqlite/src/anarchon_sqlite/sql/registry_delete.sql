DELETE FROM anarchon_registry WHERE instance = ?1
