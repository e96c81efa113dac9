-- @include statement_part_finish_one.sql
    AND status = 'running' RETURNING true
