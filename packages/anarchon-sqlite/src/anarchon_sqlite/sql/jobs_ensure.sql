INSERT OR IGNORE INTO anarchon_jobs (job) VALUES (?)
