-- A retry after a lost answer must not turn our own committed finish
-- into a "stale owner" answer: the same record already written counts.
-- @include statement_part_finish_one.sql
    AND (status = 'running' OR (status = $5 AND attempt = $7
         AND finished_at IS NOT DISTINCT FROM $12)) RETURNING true
