-- Version 14: a silent store condemns nobody (anarchon.liveness). A record
-- whose alive_until passed counts as dead in a claim or a take-over only while
-- some record is alive: after an outage of the server every record expired
-- together, and a claim that arrives before the first beat renews them
-- (statement_beat.sql) must not take over the runs of owners that are alive.
-- The three functions are replaced in place (same arguments, same results).
-- @include claim_function.sql

-- @include claim_batch_function.sql

-- @include take_over_function.sql
