-- Version 4: instance liveness (anarchon.liveness). Each instance beats into
-- its own row every 250 ms from a connection of its own, setting alive_until
-- to the server's clock plus the TTL (epoch ms, the clock of expires_ms). A
-- running run whose owner has a row that expired counts as expired wherever
-- a lease is judged: the overlap skip, the abandon-older step of a claim, and
-- take-over. An owner without a row (an instance of an older release) counts
-- as alive: its runs wait for their lease, as before.
--
-- The table stays small (one row per instance, dead ones deleted by the
-- beats after anarchon.liveness.RETAIN_DEAD_MS), so the claims test an owner
-- with one primary-key probe. Every beat rewrites its row: room on each page
-- keeps that a HOT update, pruned without VACUUM.
CREATE TABLE @schema@.instances (
    instance text PRIMARY KEY,
    alive_until bigint NOT NULL
) WITH (fillfactor = 25);

-- The functions that judge expiry, replaced by their versions with the owner rule.
-- @include claim_function.sql

-- @include claim_batch_function.sql

-- @include take_over_function.sql
