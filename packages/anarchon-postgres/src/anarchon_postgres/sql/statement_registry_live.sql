-- The live entries: not expired, and the instance's heartbeat row (if any) not expired either.
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
)
SELECT r.instance, r.head, r.expires_ms, i.alive_until
FROM t, @schema@.registry r LEFT JOIN @schema@.instances i ON i.instance = r.instance
WHERE r.expires_ms >= t.now AND (i.alive_until IS NULL OR i.alive_until >= t.now)
ORDER BY r.instance
