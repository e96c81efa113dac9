SELECT name, record, revision FROM anarchon_schedules WHERE record IS NOT NULL ORDER BY revision
