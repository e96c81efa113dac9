CREATE TABLE IF NOT EXISTS anarchon_requests (job TEXT NOT NULL, slot_ms INTEGER NOT NULL, requested_by TEXT, PRIMARY KEY (job, slot_ms)) WITHOUT ROWID
