DELETE FROM anarchon_registry WHERE expires_ms < ?1
