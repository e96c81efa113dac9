UPDATE anarchon_registry SET expires_ms = ?2 WHERE instance = ?1
