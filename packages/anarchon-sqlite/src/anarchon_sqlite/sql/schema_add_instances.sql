CREATE TABLE IF NOT EXISTS anarchon_instances (instance TEXT PRIMARY KEY, alive_until INTEGER NOT NULL)
