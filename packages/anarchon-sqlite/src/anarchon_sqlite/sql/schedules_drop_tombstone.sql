DELETE FROM anarchon_schedules WHERE name = ?1 AND record IS NULL
