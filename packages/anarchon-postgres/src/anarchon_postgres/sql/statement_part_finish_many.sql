-- Many finishes in one statement (one commit): each row is one finish's parameters $1-$14.
UPDATE @schema@.runs r SET status = f.status, instance = f.instance, attempt = f.attempt,
    fencing = f.fencing, catch_up = f.catch_up, missed = f.missed, started_at = f.started_at,
    finished_at = f.finished_at, duration_ms = f.duration_ms, error = f.error, expires_ms = @now_ms@
FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::text[], $6::text[],
    $7::integer[], $8::bigint[], $9::boolean[], $10::integer[], $11::timestamptz[], $12::timestamptz[],
    $13::bigint[], $14::text[]) AS f(job, slot_ms, manual, token, status, instance, attempt, fencing,
    catch_up, missed, started_at, finished_at, duration_ms, error)
WHERE r.job = f.job AND r.slot_ms = f.slot_ms AND r.manual = f.manual AND r.token = f.token
