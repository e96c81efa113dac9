-- Version 14: a silent store condemns nobody (anarchon.liveness). A record
-- whose alive_until passed counts as dead in a claim or a take-over only while
-- some record is alive: after an outage of the server every record expired
-- together, and a claim that arrives before the first beat renews them
-- (statement_beat.sql) must not take over the runs of owners that are alive.
-- And claim() creates the job rows it lacks before it locks any: locking the
-- rows that existed first let three instances' first claims of new jobs
-- deadlock (PostgreSQL then failed one of them: slots not run).
-- The three functions are replaced in place (same arguments, same results).
-- @include claim_function.sql

-- @include claim_batch_function.sql

-- @include take_over_function.sql
