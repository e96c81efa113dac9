INSERT INTO anarchon_audit (job, entry) VALUES (?1, ?2)
