INSERT INTO anarchon_schedule_log (name, revision, change) VALUES (?1, ?2, ?3)
