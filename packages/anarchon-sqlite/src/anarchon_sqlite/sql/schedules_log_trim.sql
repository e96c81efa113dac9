DELETE FROM anarchon_schedule_log WHERE name = ?1 AND revision <= (SELECT revision FROM anarchon_schedule_log WHERE name = ?1 ORDER BY revision DESC LIMIT 1 OFFSET ?2)
