SELECT name, changed_ms FROM anarchon_schedules WHERE record IS NULL AND changed_ms <= ?1
