-- The retry of finish_many.sql: a record this batch already wrote counts as finished.
-- @include statement_part_finish_many.sql
    AND (r.status = 'running' OR (r.status = f.status AND r.attempt = f.attempt
         AND r.finished_at IS NOT DISTINCT FROM f.finished_at))
RETURNING r.job, r.slot_ms, r.manual, r.token
