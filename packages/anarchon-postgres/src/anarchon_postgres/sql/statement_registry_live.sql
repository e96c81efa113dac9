-- The live entries: the instance's heartbeat row not expired, or, without a row, the entry not expired
-- (a beating instance refreshes its entry only every REGISTRY_KEEP_BEATING_MS).
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
)
SELECT r.instance, r.head, r.expires_ms, i.alive_until
FROM t, @schema@.registry r LEFT JOIN @schema@.instances i ON i.instance = r.instance
WHERE (i.alive_until IS NULL AND r.expires_ms >= t.now) OR i.alive_until >= t.now
ORDER BY r.instance
