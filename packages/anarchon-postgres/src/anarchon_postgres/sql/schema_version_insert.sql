INSERT INTO @schema@.schema_version (version) VALUES ($1)
