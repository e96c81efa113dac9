-- Whether the schema ($1) holds anarchon's version table. pg_tables is read with the statement's
-- snapshot; to_regclass() would consult a syscache that an advisory lock does not refresh, and miss
-- the table another instance just created.
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'schema_version')
