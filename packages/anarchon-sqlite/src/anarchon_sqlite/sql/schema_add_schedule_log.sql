CREATE TABLE IF NOT EXISTS anarchon_schedule_log (name TEXT NOT NULL, revision INTEGER NOT NULL, change TEXT NOT NULL, PRIMARY KEY (name, revision)) WITHOUT ROWID
