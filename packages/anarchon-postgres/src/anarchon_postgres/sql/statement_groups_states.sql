-- Every group with a stored limit or any entry, by name in byte order: its
-- limit (NULL: none), its running and waiting entries and the oldest waiting
-- slot, counting only entries whose holder is alive by the rule of
-- places_function.sql (a record, not expired, or none alive at all), on the
-- server's clock. An administrator's read of every entry: they are counted
-- per group, holder and state first (one pass), and only those few counts
-- are judged against the heartbeat records.
WITH t AS MATERIALIZED (
    SELECT @now_ms@ AS now
), a AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM @schema@.instances, t WHERE alive_until >= t.now) AS alive
), held AS (
    SELECT group_name, instance, running, count(*) AS entries, min(slot_ms) AS oldest
    FROM @schema@.group_places GROUP BY group_name, instance, running
), live AS (
    SELECT h.* FROM held h JOIN @schema@.instances hb ON hb.instance = h.instance, t, a
    WHERE NOT (hb.alive_until < t.now AND a.alive)
), names AS (
    SELECT group_name FROM @schema@.group_limits UNION SELECT group_name FROM held
)
SELECT n.group_name, l.max_running,
       coalesce(sum(v.entries) FILTER (WHERE v.running), 0)::bigint AS running,
       coalesce(sum(v.entries) FILTER (WHERE NOT v.running), 0)::bigint AS waiting,
       min(v.oldest) FILTER (WHERE NOT v.running) AS oldest_waiting_ms
FROM names n
LEFT JOIN @schema@.group_limits l ON l.group_name = n.group_name
LEFT JOIN live v ON v.group_name = n.group_name
GROUP BY n.group_name, l.max_running
ORDER BY n.group_name
