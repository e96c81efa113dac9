DELETE FROM anarchon_schedules WHERE record IS NULL AND changed_ms < ?1
