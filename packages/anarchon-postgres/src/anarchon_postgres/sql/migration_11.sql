-- Version 11: the audit trail (anarchon.audit). One row per entry, appended and
-- never updated: who paused, resumed, triggered, backfilled or changed a stored
-- schedule, when and why (the entry's text, kept as given). The id is an
-- identity, so ids only grow; the index on (job, id) serves "the entries of one
-- job, newest first". Older releases never read it: a fleet can be upgraded pod
-- by pod, and their actions are simply not recorded.
CREATE TABLE @schema@.audit (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job text NOT NULL,
    entry text NOT NULL
);
CREATE INDEX audit_by_job ON @schema@.audit (job, id);
