CREATE TABLE IF NOT EXISTS anarchon_pauses (job TEXT PRIMARY KEY, since_ms INTEGER NOT NULL, until_ms INTEGER, reason TEXT, paused_by TEXT)
