CREATE TABLE IF NOT EXISTS anarchon_schedules (name TEXT PRIMARY KEY, record TEXT NULL, revision INTEGER NOT NULL, changed_ms INTEGER NOT NULL)
