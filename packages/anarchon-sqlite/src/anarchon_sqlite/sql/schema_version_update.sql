UPDATE anarchon_meta SET value = ? WHERE key = 'schema_version'
