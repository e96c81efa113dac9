DELETE FROM anarchon_schedule_log WHERE name = ?1
