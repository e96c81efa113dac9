-- One change ($1 name, $2 record or NULL, $3 expected revision or NULL, $4 change text,
-- $5 TOMBSTONE_MS, $6 LOG_KEEP, $7 a retry): the new revision, or NULL and the current one.
SELECT o_revision, o_current FROM @schema@.put_schedule($1, $2, $3, $4, $5, $6, $7)
