-- One instance creates or migrates a schema at a time ($1 the lock class, $2 the schema's name).
SELECT pg_advisory_xact_lock($1, hashtext($2))
