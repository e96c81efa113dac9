-- This instance's entry ($1 instance, $2 head, $3 jobs, $4 TTL ms, $5 RETAIN_DEAD_MS), live until the
-- server's now + TTL; entries expired for longer than $5 are deleted on the way.
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
), gone AS (
    DELETE FROM @schema@.registry d USING t WHERE d.expires_ms < t.now - $5 AND d.instance <> $1
)
INSERT INTO @schema@.registry (instance, head, jobs, expires_ms) SELECT $1, $2, $3, t.now + $4 FROM t
ON CONFLICT (instance) DO UPDATE SET head = excluded.head, jobs = excluded.jobs, expires_ms = excluded.expires_ms
