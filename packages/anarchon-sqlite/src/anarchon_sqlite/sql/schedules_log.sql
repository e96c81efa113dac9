SELECT revision, change FROM anarchon_schedule_log WHERE name = ?1 ORDER BY revision
