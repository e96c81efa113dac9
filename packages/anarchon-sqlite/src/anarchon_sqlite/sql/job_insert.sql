INSERT INTO anarchon_jobs (job) VALUES (?)
