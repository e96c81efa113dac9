CREATE INDEX IF NOT EXISTS anarchon_places_turn ON anarchon_places (group_name, running, slot_ms, job, manual)
