-- Version 8: stored schedules (anarchon.schedules). One row per schedule name
-- (record NULL: a tombstone, kept TOMBSTONE_MS so every instance sees the
-- removal), each name's change log, and the counter every change takes its
-- revision from. The counter is a one-row table, not a sequence: a refused
-- change must leave it alone, and nextval() is never rolled back. Every change
-- goes through put_schedule(), one statement and one transaction, serialised
-- on the counter row. Older releases never read these tables.
CREATE TABLE @schema@.schedules (
    name text PRIMARY KEY,
    record text NULL,
    revision bigint NOT NULL,
    changed_ms bigint NOT NULL
);
-- The poll's "what changed after revision n", and the purge of old tombstones.
CREATE UNIQUE INDEX schedules_by_revision ON @schema@.schedules (revision);
CREATE INDEX schedules_tombstones ON @schema@.schedules (changed_ms) WHERE record IS NULL;

CREATE TABLE @schema@.schedule_log (
    name text NOT NULL,
    revision bigint NOT NULL,
    change text NOT NULL,
    PRIMARY KEY (name, revision)
);

CREATE TABLE @schema@.schedule_counter (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    revision bigint NOT NULL
);
INSERT INTO @schema@.schedule_counter (one, revision) VALUES (true, 0);

-- @include schedule_put_function.sql
