SELECT value FROM anarchon_meta WHERE key = 'schema_version'
