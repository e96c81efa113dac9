SELECT name, record, revision FROM anarchon_schedules WHERE revision > ?1 ORDER BY revision
