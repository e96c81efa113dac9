-- Version 7: the fleet registry (anarchon.fleet). One row per instance: its
-- head (read by every instance every second) and its job definitions (read
-- only when the head's fingerprint changed), live until expires_ms on the
-- server's clock, pushed forward every second. An entry counts as live while
-- it has not expired and its instance's heartbeat row, if any, has not either.
-- Older releases never read it: a fleet can be upgraded pod by pod.
CREATE TABLE @schema@.registry (
    instance text PRIMARY KEY,
    head text NOT NULL,
    jobs text NOT NULL,
    expires_ms bigint NOT NULL
) WITH (fillfactor = 50);
