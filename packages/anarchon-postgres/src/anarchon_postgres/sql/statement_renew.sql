-- Renew the leases still ours (same token, running, not handed over); the renewed ones come back.
UPDATE @schema@.runs r SET expires_ms = @now_ms@ + r.lease_ms
FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[]) AS g(job, slot_ms, manual, token)
WHERE r.job = g.job AND r.slot_ms = g.slot_ms AND r.manual = g.manual AND r.token = g.token
    AND r.status = 'running' AND NOT r.handed_over
RETURNING r.job, r.slot_ms, r.manual, r.token
