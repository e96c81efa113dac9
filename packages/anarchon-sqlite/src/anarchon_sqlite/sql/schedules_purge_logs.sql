DELETE FROM anarchon_schedule_log WHERE name IN (SELECT name FROM anarchon_schedules WHERE record IS NULL AND changed_ms < ?1)
