CREATE INDEX IF NOT EXISTS anarchon_schedules_tombstones ON anarchon_schedules (changed_ms) WHERE record IS NULL
