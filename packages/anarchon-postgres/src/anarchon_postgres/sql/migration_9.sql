-- Version 9: a job's fencing counter starts at the server's clock in milliseconds
-- (anarchon.backend.fencing_floor), not at 0, so a job row made again (a new
-- database, a dropped schema) never hands out a token lower than one the lost row
-- gave. Rows that exist keep their counters; older releases insert jobs by name
-- only and get the same default.
ALTER TABLE @schema@.jobs
    ALTER COLUMN fencing SET DEFAULT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
