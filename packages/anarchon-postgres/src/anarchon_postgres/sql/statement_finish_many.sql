-- @include statement_part_finish_many.sql
    AND r.status = 'running'
RETURNING r.job, r.slot_ms, r.manual, r.token
