-- A backfilled job's row, made if the fleet has not made it yet (its lock is taken next).
INSERT INTO @schema@.jobs (name) VALUES ($1) ON CONFLICT (name) DO NOTHING
