-- Requests served: $1 jobs and $2 slots, one element per request.
DELETE FROM @schema@.requests r USING unnest($1::text[], $2::bigint[]) AS d(job, slot_ms)
WHERE r.job = d.job AND r.slot_ms = d.slot_ms
