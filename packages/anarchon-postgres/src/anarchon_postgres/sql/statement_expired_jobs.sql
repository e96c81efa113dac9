-- The jobs with a running run whose lease expired. From the partial index of
-- running runs: cheap however many jobs there are.
SELECT DISTINCT job FROM @schema@.runs WHERE status = 'running' AND expires_ms <= @now_ms@
