-- The jobs with a running run whose lease expired, or whose owner's heartbeat
-- did. The first part reads the expired end of the partial index of running
-- runs: cheap however many jobs there are. The second reads the dead records
-- (none, as a rule, from a table of one row per instance), and only those that
-- expired within $1 ms: the caller's longest lease and a margin, since an owner
-- dead for longer has stopped renewing for longer, and its runs' leases have
-- expired as well.
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
)
SELECT r.job FROM @schema@.runs r, t WHERE r.status = 'running' AND r.expires_ms <= t.now
UNION
SELECT r.job FROM t, @schema@.instances d JOIN @schema@.runs r ON r.instance = d.instance AND r.status = 'running'
WHERE d.alive_until < t.now AND d.alive_until >= t.now - $1
  AND EXISTS (SELECT 1 FROM @schema@.instances a WHERE a.alive_until >= t.now)
