INSERT INTO anarchon_meta (key, value) VALUES ('schema_version', ?)
