SELECT coalesce(max(version), 0) FROM @schema@.schema_version
