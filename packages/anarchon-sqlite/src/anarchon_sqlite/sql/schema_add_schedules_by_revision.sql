CREATE UNIQUE INDEX IF NOT EXISTS anarchon_schedules_by_revision ON anarchon_schedules (revision)
