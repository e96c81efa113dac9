-- One heartbeat ($1 instance, $2 TTL ms, $3 RETAIN_DEAD_MS): this instance
-- alive until the server's now + TTL (created, renewed or revived), records
-- dead for longer than $3 deleted, and the other dead ones returned. One
-- statement, one commit; the answer is read from the statement's snapshot,
-- so it leaves out what `gone` deletes by the same test.
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
), mine AS (
    INSERT INTO @schema@.instances (instance, alive_until) SELECT $1, t.now + $2 FROM t
    ON CONFLICT (instance) DO UPDATE SET alive_until = excluded.alive_until
), gone AS (
    DELETE FROM @schema@.instances d USING t WHERE d.alive_until < t.now - $3 AND d.instance <> $1
)
SELECT d.instance, d.alive_until FROM @schema@.instances d, t
WHERE d.alive_until < t.now AND d.alive_until >= t.now - $3 AND d.instance <> $1
