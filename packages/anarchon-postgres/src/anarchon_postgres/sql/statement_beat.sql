-- One heartbeat ($1 instance, $2 TTL ms, $3 RETAIN_DEAD_MS): this instance
-- alive until the server's now + TTL (created, renewed or revived), records
-- dead for longer than $3 deleted, and the other dead ones returned. One
-- statement, one commit; the answer is read from the statement's snapshot,
-- so it leaves out what `gone` deletes and what `renewed` renews by the same
-- tests. A silent store condemns nobody (anarchon.liveness.after_silence):
-- when no beat arrived for more than half a TTL (the newest record's
-- alive_until minus the TTL), the records alive at that newest beat are
-- first renewed to now + 2 TTL. The last row, its instance NULL, holds the
-- ms until the first other live record expires (none: no other is alive),
-- read from the same snapshot: the heart aims its next beat just after it.
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
), silent AS MATERIALIZED (
    SELECT n.last FROM (SELECT max(alive_until) - $2::bigint AS last FROM @schema@.instances) n, t
    WHERE t.now - n.last > $2::bigint / 2
), renewed AS (
    UPDATE @schema@.instances r SET alive_until = t.now + 2 * $2::bigint FROM t, silent s
    WHERE r.alive_until >= s.last AND r.instance <> $1
), mine AS (
    INSERT INTO @schema@.instances (instance, alive_until) SELECT $1, t.now + $2 FROM t
    ON CONFLICT (instance) DO UPDATE SET alive_until = excluded.alive_until
), gone AS (
    DELETE FROM @schema@.instances d USING t WHERE d.alive_until < t.now - $3 AND d.instance <> $1
    AND NOT EXISTS (SELECT 1 FROM silent s WHERE d.alive_until >= s.last)
)
SELECT d.instance, d.alive_until FROM @schema@.instances d, t
WHERE d.alive_until < t.now AND d.alive_until >= t.now - $3 AND d.instance <> $1
AND NOT EXISTS (SELECT 1 FROM silent s WHERE d.alive_until >= s.last)
UNION ALL
SELECT NULL, min(a.alive_until) - t.now FROM @schema@.instances a, t
WHERE a.alive_until >= t.now AND a.instance <> $1 GROUP BY t.now
