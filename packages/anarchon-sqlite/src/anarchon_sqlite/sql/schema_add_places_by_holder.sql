CREATE INDEX IF NOT EXISTS anarchon_places_by_holder ON anarchon_places (group_name, instance)
