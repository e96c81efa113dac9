SELECT record, revision FROM anarchon_schedules WHERE name = ?1
