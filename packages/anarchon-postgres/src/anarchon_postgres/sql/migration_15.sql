-- Version 15: concurrency groups (anarchon.groups, capability groups). A
-- group's limit (a group without a row has none), and one entry per run that
-- asked for a place in its group: waiting, or running (holding a place).
-- Instances of older releases neither read nor write either table: they know
-- no group= option, so a job with a group runs on this release's instances.
--
-- Names and jobs sort in byte order (COLLATE "C"), as the reference sorts
-- them in Python, whatever the database's collation: the turn of a waiting
-- entry is (slot_ms, job, manual), and that order must be the same
-- everywhere. The primary key is the run's key in its group (Place.key);
-- group_places_turn serves the walk of a group's turn (its running entries
-- counted, its first waiting ones admitted) without visiting the rest, and
-- group_places_holder the search for the group's dead holders, one probe
-- per distinct holder (places_function.sql).
CREATE TABLE @schema@.group_limits (
    group_name text COLLATE "C" PRIMARY KEY,
    max_running integer NOT NULL CHECK (max_running > 0)
);

CREATE TABLE @schema@.group_places (
    group_name text COLLATE "C" NOT NULL,
    job text COLLATE "C" NOT NULL,
    slot_ms bigint NOT NULL,
    manual boolean NOT NULL,
    token text NOT NULL,
    instance text NOT NULL,
    running boolean NOT NULL,
    PRIMARY KEY (group_name, job, slot_ms, manual)
);

CREATE INDEX group_places_turn ON @schema@.group_places (group_name, running, slot_ms, job, manual);

CREATE INDEX group_places_holder ON @schema@.group_places (group_name, instance);

-- @include places_function.sql
